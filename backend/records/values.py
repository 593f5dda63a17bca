"""A column's values: what a column of any dataset (built-in or company-defined) may hold, checked in one place.

`ColumnSpec` says what a column holds; `coerce_value` turns a proposed or imported value into the column's
Python value or says why not (`ValueProblem`). Proposed changes (actions/service.py), company-defined rows
(records/defined.py) and file imports all check values here. Company-defined rows keep their values as JSON
(`to_json`), read back to the same Python types as a built-in column's (`from_json`), so the records API and
the CSV exports write them alike."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from backend.records.columns import ColumnKind

TEXT_MAX = 10_000  # a company-defined text column's default limit


class ValueProblem(ValueError):
    """A value the column cannot hold; the message says why, naming the column."""


@dataclass(frozen=True)
class ColumnSpec:
    name: str
    kind: ColumnKind
    nullable: bool = True
    max_length: int | None = None  # strings only
    enum: tuple[str, ...] | None = None  # strings only: the allowed values

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": str(self.kind),
            "nullable": self.nullable,
            "max_length": self.max_length,
            "enum": list(self.enum) if self.enum else None,
        }

    @classmethod
    def read(cls, raw: dict[str, Any]) -> ColumnSpec:
        enum = raw.get("enum")
        return cls(
            name=raw["name"],
            kind=ColumnKind(raw["kind"]),
            nullable=bool(raw.get("nullable", True)),
            max_length=raw.get("max_length"),
            enum=tuple(enum) if enum else None,
        )


_TRUE, _FALSE = ("true", "1", "yes"), ("false", "0", "no")


def coerce_value(spec: ColumnSpec, value: Any, *, from_text: bool = False) -> Any:
    """`value` as the column's Python value (str, int, Decimal, bool, date, aware datetime, or None).

    `from_text`: the value came from a file or a query string, so "12" may be an integer and "" is empty;
    otherwise (a proposed change's JSON) a whole number must be a JSON number, a boolean a JSON boolean."""
    field, kind = spec.name, spec.kind
    if from_text and isinstance(value, str) and value == "" and kind is not ColumnKind.string:
        value = None
    if value is None:
        if spec.nullable:
            return None
        raise ValueProblem(f"{field} cannot be empty")
    try:
        if kind is ColumnKind.string:
            if not isinstance(value, str):
                raise ValueProblem(f"{field} must be text")
            if spec.max_length and len(value) > spec.max_length:
                raise ValueProblem(f"{field} is longer than {spec.max_length} characters")
            if spec.enum and value not in spec.enum:
                raise ValueProblem(f"{field} must be one of {list(spec.enum)}")
            return value
        if kind is ColumnKind.integer:
            if from_text and isinstance(value, str):
                value = int(value.strip())
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueProblem(f"{field} must be a whole number")
            return value
        if kind is ColumnKind.number:
            if isinstance(value, bool) or not isinstance(value, int | float | str | Decimal):
                raise ValueProblem(f"{field} must be a number")
            number = Decimal(str(value).strip())
            if not number.is_finite():
                raise ValueProblem(f"{field} must be a finite number")
            return number
        if kind is ColumnKind.boolean:
            if from_text and isinstance(value, str) and value.strip().lower() in _TRUE + _FALSE:
                return value.strip().lower() in _TRUE
            if not isinstance(value, bool):
                raise ValueProblem(f"{field} must be true or false")
            return value
        if kind is ColumnKind.date:
            if isinstance(value, dt.datetime):
                raise ValueProblem(f"{field} must be a date")
            return value if isinstance(value, dt.date) else dt.date.fromisoformat(str(value).strip())
        if kind is ColumnKind.datetime:
            parsed = (
                value if isinstance(value, dt.datetime) else dt.datetime.fromisoformat(str(value).strip())
            )
            return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)
    except (ValueError, InvalidOperation) as exc:
        if isinstance(exc, ValueProblem):
            raise
        raise ValueProblem(f"{field}: {value!r} is not a valid {kind}") from exc
    raise ValueProblem(f"{field} has no known kind")


def to_json(value: Any) -> Any:
    """A column's Python value as stored in a company-defined row's JSON: numbers as exact decimal text, dates
    and datetimes in ISO form, the rest as they are."""
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, dt.date | dt.datetime):
        return value.isoformat()
    return value


def from_json(kind: ColumnKind, value: Any) -> Any:
    """A stored JSON value back as the Python value a built-in column of the same kind reads as."""
    if value is None:
        return None
    if kind is ColumnKind.number:
        return Decimal(value)
    if kind is ColumnKind.date:
        return dt.date.fromisoformat(value)
    if kind is ColumnKind.datetime:
        return dt.datetime.fromisoformat(value)
    return value
