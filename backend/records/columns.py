"""What kind of value a dataset column holds: the one vocabulary for the API (`DatasetInfo.types`), the MCP
tools, record filters, CSV exports, the injection scan of exports and proposed changes.

Piccolo-free on purpose: clients read it. Which Piccolo column class is which kind is decided in one place,
`backend/records/datasets.py` (`kind_of`)."""

from __future__ import annotations

from enum import StrEnum

# who sees a row, a Drive file or folder: its owner, the owner's team, or the whole company
VISIBILITIES = ("private", "team", "company")


class ColumnKind(StrEnum):
    """The values are what the API and the MCP tools show (`string`, never Piccolo's `Varchar`)."""

    string = "string"  # text: the only kind that can hold prose (the injection scan reads these)
    integer = "integer"
    number = "number"  # exact decimals (money), sent as a string
    boolean = "boolean"
    date = "date"  # YYYY-MM-DD
    datetime = "datetime"  # ISO 8601
