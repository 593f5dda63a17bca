"""One vocabulary for what a column holds: every Piccolo column class the datasets use has a ColumnKind,
the API and the MCP tools show the kind (never Piccolo's class name), and nothing else switches on the
class names."""

from __future__ import annotations

import re
from decimal import Decimal
from pathlib import Path

import pytest
from piccolo.columns import JSON, BigInt, Varchar

from backend.actions.service import ItemProblem, coerce
from backend.records.columns import ColumnKind
from backend.records.datasets import DATASETS, kind_of
from backend.staging.export import text_columns
from tests.support.http import login

ROOT = Path(__file__).resolve().parents[2]
PICCOLO_NAMES = ("Varchar", "Text", "Integer", "BigInt", "SmallInt", "Serial", "ForeignKey", "Numeric",
                 "Decimal", "Real", "DoublePrecision", "Float", "Boolean", "Date", "Timestamp", "Timestamptz")  # fmt: skip
QUOTED_NAME = re.compile(r"""["'](%s)["']""" % "|".join(PICCOLO_NAMES))  # noqa: UP031 - a regex


def test_every_column_of_every_dataset_has_a_kind() -> None:
    for dataset in DATASETS.values():
        for column in dataset.table._meta.columns:
            assert isinstance(kind_of(column), ColumnKind), (dataset.name, column._meta.name)
        assert set(dataset.export_types) == set(dataset.export_columns)
        assert all(isinstance(k, ColumnKind) for k in dataset.export_types.values())


def test_kinds_of_the_deals_columns() -> None:
    types = DATASETS["deals"].export_types
    assert types["id"] is types["owner_id"] is types["team_id"] is types["version"] is ColumnKind.integer
    assert types["amount"] is ColumnKind.number and types["close_date"] is ColumnKind.date
    assert types["stage"] is ColumnKind.string and types["created_at"] is ColumnKind.datetime
    assert kind_of(BigInt()) is ColumnKind.integer  # a subclass follows its base (Integer)


def test_a_column_class_without_a_kind_is_refused() -> None:
    """Control: the mapping is not a catch-all; a class nobody mapped fails loudly, not as text."""
    with pytest.raises(TypeError, match="JSON"):
        kind_of(JSON())
    assert kind_of(Varchar()) is ColumnKind.string


def test_only_text_columns_are_scanned_for_prose() -> None:
    dataset = DATASETS["deals"]
    scanned = {dataset.export_columns[j] for j in text_columns(dataset)}
    assert "stage" in scanned and "visibility" in scanned
    assert not scanned & {"id", "amount", "close_date", "owner_id", "created_at", "version"}


def test_proposed_values_are_coerced_by_kind() -> None:
    deals = DATASETS["deals"]
    assert coerce(deals, "amount", "12.50") == Decimal("12.50")
    with pytest.raises(ItemProblem, match="not a valid date"):
        coerce(deals, "close_date", "soon")
    with pytest.raises(ItemProblem, match="cannot be changed by a proposal"):
        coerce(deals, "owner", 1)  # a foreign key is an integer, yet never a proposal's to change


@pytest.mark.sqlite  # the kinds come from the tables' Python definitions, not from an engine
async def test_the_api_lists_kinds_not_piccolo_class_names(client) -> None:
    await login(client, "admin@acme.example")
    r = await client.get("/api/records/")
    assert r.status_code == 200
    deals = next(d for d in r.json() if d["name"] == "deals")
    assert deals["types"]["amount"] == "number" and deals["types"]["stage"] == "string"
    assert {t for d in r.json() for t in d["types"].values()} <= {k.value for k in ColumnKind}
    r = await client.get("/api/records/deals", params={"amount": "lots"})
    assert r.status_code == 422 and "is not a valid number" in r.text


def test_no_code_switches_on_piccolo_class_names() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{n}"
        for folder in ("backend", "console")
        for path in sorted((ROOT / folder).rglob("*.py"))
        if "migrations" not in path.parts
        for n, line in enumerate(path.read_text().splitlines(), start=1)
        if QUOTED_NAME.search(line)
    ]
    assert not found, found
    assert QUOTED_NAME.search('if kind in ("Integer", "BigInt"):')  # control: the old switch is caught


def test_the_bulk_checker_of_a_column_is_coerce_value_exactly() -> None:
    """Imports and syncs check a million rows with `json_coercer` (chosen once per column) instead of
    `coerce_value` per cell: for awkward values of every kind, typed and as text, nullable or not, both give
    the same stored JSON or refuse with the same words. A checker that accepted more (a float in an integer
    column, " 1e3 " anywhere, an empty date in a required column), or said a refusal differently, fails here."""
    import datetime as dt

    from backend.records.values import ColumnSpec, ValueProblem, coerce_value, json_coercer, to_json

    values = [None, "", " ", "0", "12", " 12 ", "-7", "1_000", "1e3", "12.50", "nan", "inf", "sNaN", "abc",
              "true", " TRUE ", "yes", "0", "no", "x", "2026-01-02", " 2026-01-02 ", "20260102", "2026-02-30",
              "2026-06-01T12:00:00", "2026-06-01 12:00:00+02:00", "2026-06-01T12:00:00Z", "١٢", "a" * 11,
              0, 1, -3, 2.5, float("nan"), True, False, Decimal("1.10"), Decimal("Infinity"),
              dt.date(2026, 1, 2), dt.datetime(2026, 1, 2, 3, 4), dt.datetime(2026, 1, 2, tzinfo=dt.UTC),
              ["list"], {"a": 1}]  # fmt: skip
    specs = [ColumnSpec("c", kind, nullable) for kind in ColumnKind for nullable in (True, False)]
    specs += [
        ColumnSpec("c", ColumnKind.string, True, 10),
        ColumnSpec("c", ColumnKind.string, True, None, ("x", "yes")),
    ]
    for spec in specs:
        for from_text in (True, False):
            fast = json_coercer(spec, from_text=from_text)
            for _ in range(2):  # the second time from what the checker remembers
                for value in values:
                    try:
                        expected = ("ok", to_json(coerce_value(spec, value, from_text=from_text)))
                    except ValueProblem as exc:
                        expected = ("refused", str(exc))
                    try:
                        got = ("ok", fast(value))
                    except ValueProblem as exc:
                        got = ("refused", str(exc))
                    assert got == expected and type(got[1]) is type(expected[1]), (spec, from_text, value)
