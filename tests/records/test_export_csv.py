"""The column-wise CSV writer of dataset exports against csv.writer itself, on awkward values."""

from __future__ import annotations

import csv
import datetime as dt
import io
import random
from decimal import Decimal

from backend.records.export import to_csv as _to_csv

AWKWARD = [
    "",
    " ",
    "plain",
    "a,b",
    'say "hi"',
    '"',
    '""',
    "line\nbreak",
    "cr\ronly",
    "crlf\r\nend",
    " leading space",
    "trailing space ",
    "tab\there",
    "semi;colon",
    "ünïcödé — dash",
    "emoji 🙂",
    "\x00nul",
    "\u2028line separator",
    "'single'",
    "=1+2",
    "None",
    "\x1e record separator",
]
OTHER = [None, 0, -7, 10**18, 1.5, 34817.18, 0.1, Decimal("12.50"), True, False, dt.date(2026, 1, 5)]


def reference(header: list[str], rows: list[list[object]]) -> bytes:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return out.getvalue().encode()


def columns_of(rows: list[list[object]], width: int) -> list[list[object]]:
    return [[r[j] for r in rows] for j in range(width)]


def test_awkward_text_matches_csv_writer() -> None:
    rows = [[v, i, v] for i, v in enumerate(AWKWARD)]
    header = ["text", "n", "again"]
    ours = _to_csv(header, columns_of(rows, 3))
    assert ours == reference(header, [[("" if v is None else v) for v in r] for r in rows])
    assert b'"a,b"' in ours and b'"say ""hi"""' in ours  # the check looks at quoting at all


def test_mixed_and_null_values_match_csv_writer() -> None:
    rng = random.Random(5)
    pool = AWKWARD + OTHER
    rows = [[rng.choice(pool) for _ in range(6)] for _ in range(400)]
    header = [f"c{j}" for j in range(6)]
    assert _to_csv(header, columns_of(rows, 6)) == reference(header, rows)


def test_numeric_and_text_columns_without_nulls() -> None:
    rows = [[i, f"name {i}", i / 4, Decimal(i) / 100] for i in range(1000)]
    header = ["id", "name", "ratio", "amount"]
    assert _to_csv(header, columns_of(rows, 4)) == reference(header, rows)


def test_no_rows_is_just_the_header() -> None:
    assert _to_csv(["id", "name"], [(), ()]) == b"id,name\n"


def test_positive_control_a_wrong_writer_is_caught() -> None:
    rows = [["a,b"]]
    naive = ("x\n" + "\n".join(",".join(map(str, r)) for r in rows) + "\n").encode()
    assert naive != reference(["x"], rows)
