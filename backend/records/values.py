"""A column's values: what a column of any dataset (built-in or company-defined) may hold, checked in one place.

`ColumnSpec` says what a column holds; `coerce_value` turns a proposed or imported value into the column's
Python value or says why not (`ValueProblem`). Proposed changes (actions/service.py), company-defined rows
(records/defined.py) and file imports all check values here. Company-defined rows keep their values as JSON
(`to_json`), read back to the same Python types as a built-in column's (`from_json`), so the records API and
the CSV exports write them alike."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
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


def json_coercer(spec: ColumnSpec, *, from_text: bool = False) -> Callable[[Any], Any]:
    """`lambda value: to_json(coerce_value(spec, value, from_text=from_text))`, chosen once per column for bulk
    writes (imports, syncs: a million rows of a dozen columns). It takes a short way for the values a column
    usually holds and hands every other value to `coerce_value` itself, so what is accepted and each refusal's
    words stay exactly `coerce_value`'s (tests/records/test_column_kinds.py compares the two). A number, date
    or datetime read from text is remembered (up to `_REMEMBERED` texts a column): a file repeats them."""

    def slow(value: Any) -> Any:
        return to_json(coerce_value(spec, value, from_text=from_text))

    kind, nullable = spec.kind, spec.nullable
    if kind is ColumnKind.string:
        limit, allowed = spec.max_length, frozenset(spec.enum) if spec.enum else None

        def string(value: Any) -> Any:
            if (
                value.__class__ is str
                and (not limit or len(value) <= limit)
                and (allowed is None or value in allowed)
            ):
                return value
            return slow(value)

        return string
    if kind is ColumnKind.integer:

        def integer(value: Any) -> Any:
            cls = value.__class__
            if cls is int:
                return value
            if cls is str and from_text and value:
                try:
                    return int(value)
                except ValueError:
                    pass
            elif nullable and (value is None or (from_text and value == "")):
                return None
            return slow(value)

        return integer
    if kind is ColumnKind.boolean:
        words = {w: True for w in _TRUE} | {w: False for w in _FALSE}

        def boolean(value: Any) -> Any:
            cls = value.__class__
            if cls is bool:
                return value
            if cls is str and from_text:
                found = words.get(value) if value in words else words.get(value.strip().lower())
                if found is not None:
                    return found
            if nullable and (value is None or (from_text and value == "")):
                return None
            return slow(value)

        return boolean
    parse = _TEXT_PARSERS.get(kind)
    if parse is None:
        return slow
    typed = _TYPED.get(kind)
    remembered: dict[str, Any] = {}

    def parsed(value: Any) -> Any:
        cls = value.__class__
        if cls is str and value:
            found = remembered.get(value)
            if found is not None:
                return found
            try:
                found = parse(value)
            except (ValueError, InvalidOperation):
                found = None
            if found is not None:
                if len(remembered) >= _REMEMBERED:
                    remembered.clear()
                remembered[value] = found
                return found
        elif typed is not None and cls in typed:
            found = typed[cls](value)
            if found is not None:
                return found
        elif nullable and (value is None or (from_text and value == "")):
            return None
        return slow(value)

    return parsed


_REMEMBERED = 10_000


def _number_text(text: str) -> str | None:
    number = Decimal(text)  # as coerce_value's Decimal(str(value).strip()): Decimal skips the same spaces
    return str(number) if number.is_finite() else None


def _datetime_text(text: str) -> str:
    parsed = dt.datetime.fromisoformat(text.strip())
    return (parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)).isoformat()


# a text's stored JSON for the kinds read from text whatever `from_text` says (coerce_value parses them both
# ways); None where coerce_value would not take the short way
_TEXT_PARSERS: dict[ColumnKind, Callable[[str], Any]] = {
    ColumnKind.number: _number_text,
    ColumnKind.date: lambda text: dt.date.fromisoformat(text.strip()).isoformat(),
    ColumnKind.datetime: _datetime_text,
}
_TYPED: dict[ColumnKind, dict[type, Callable[[Any], Any]]] = {
    ColumnKind.number: {
        int: lambda v: _number_text(str(v)),
        float: lambda v: _number_text(str(v)),
        Decimal: lambda v: _number_text(str(v)),
    },
    ColumnKind.date: {dt.date: lambda v: v.isoformat()},
    ColumnKind.datetime: {dt.datetime: lambda v: (v if v.tzinfo else v.replace(tzinfo=dt.UTC)).isoformat()},
}
