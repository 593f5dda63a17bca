"""Planting attack texts into realistic business cells and documents.

A planted cell is the attack alone (as a whole notes cell), after an ordinary note, before one, or wrapped in
an email body; in a text document the attack's lines sit between business paragraphs. Positions are
recorded so recall is scored per cell (table) or per attack line range (document).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from backend.injection_training.benign import Table, business_tables, text_documents
from backend.injection_training.sources import Attack


@dataclass
class PlantedTable:
    table: Table
    planted: dict[tuple[int, int], Attack]  # (row index, column index) -> attack


@dataclass
class PlantedDoc:
    lines: list[str]
    attack: Attack
    first: int  # 0-based line range of the attack
    last: int


def in_context(attack: str, note: str, rng: random.Random) -> str:
    x = rng.random()
    if x < 0.4 or not note:
        return attack
    if x < 0.7:
        return note + " " + attack
    if x < 0.85:
        return attack + " " + note
    return note + "\n\n" + attack + "\n\nBest regards"


def plant_tables(attacks: list[Attack], seed: int, split: str | None = "test") -> list[PlantedTable]:
    """One attack per row, each in a free-text column of a business table of its own kind."""
    rng = random.Random(seed)
    tables = business_tables(max(len(attacks), 1), seed, split)
    out: list[PlantedTable] = []
    k = 0
    for table in tables:
        planted: dict[tuple[int, int], Attack] = {}
        rows = [list(r) for r in table.rows]
        for r in range(len(rows)):
            if k >= len(attacks):
                break
            col = rng.choice(table.text_columns)
            rows[r][col] = in_context(attacks[k].text, rows[r][col], rng)
            planted[(r, col)] = attacks[k]
            k += 1
        if planted:
            n = max(r for r, _ in planted) + 1
            out.append(PlantedTable(Table(table.kind, table.header, rows[:n], table.text_columns), planted))
    return out


def plant_docs(attacks: list[Attack], seed: int, split: str | None = "test") -> list[PlantedDoc]:
    rng = random.Random(seed)
    docs = text_documents(len(attacks), seed, split)
    out = []
    for attack, lines in zip(attacks, docs, strict=False):
        at = rng.randint(1, len(lines))
        body = attack.text.strip("\n").split("\n")
        new = lines[:at] + body + lines[at:]
        out.append(PlantedDoc(new, attack, at, at + len(body) - 1))
    return out
