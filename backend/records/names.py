"""The built-in datasets' names, in the order the product lists them, without their tables: what a client (the
console's audit filter) may import without loading Piccolo. `records/datasets.py` defines each one and refuses to
load if its list and this one differ."""

from __future__ import annotations

DATASET_NAMES: tuple[str, ...] = (
    "contacts",
    "accounts",
    "deals",
    "quotes",
    "invoices",
    "tasks",
    "expenses",
    "employees",
    "calendar_events",
    "signing_envelopes",
    "inventory_items",
    "products",
)
