"""Scanner throughput on realistic exports: `bench_scan()` returns cells per second (median of repeats).

Tiers 1 and 2, every cell (issue 55's throughput goal): tier 3, the full encoder on a bounded number of
doubtful cells per proposal, is switched off here and measured by `cleanroom bench scan-cache`, whose proposal
scan is where its budget applies."""

from __future__ import annotations

import random
import statistics
import time
from typing import Any

from backend.injection import encoder
from backend.injection.model import clear_caches
from backend.injection.scanner import scan_table

FIRST = [
    "Anna",
    "Jürgen",
    "María",
    "François",
    "Li",
    "Olu",
    "Sven",
    "Priya",
    "Zoë",
    "Tomás",
    "Mehmet",
    "Keiko",
]
LAST = [
    "Schmidt",
    "García",
    "Dubois",
    "Nowak",
    "Okafor",
    "Larsen",
    "Iyer",
    "Müller",
    "Rossi",
    "Tanaka",
    "Smith",
]
COMPANIES = [
    "Acme Analytics",
    "Globex GmbH",
    "Initech S.A.",
    "Umbrella SARL",
    "Hooli Ltd",
    "Stark Industries",
]
STAGES = ["Prospecting", "Qualification", "Proposal", "Negotiation", "Closed Won", "Closed Lost"]
NOTE_TAILS = [
    "", "", "", " Contact: {first} {last}.", " Ref {ref}.", " Discussed with {first} on {date}.", " Amount {amount} EUR.",
    " Waiting for PO {ref}.", " (call {phone})", " Next step: send revised quote.", " Kunde: {company}.",
]  # fmt: skip
NOTES = [
    "Call back next week about pricing",
    "Customer asked for a discount on the annual plan; assistant manager approval needed",
    "Please ignore the previous invoice, a corrected one follows",
    "Send the signed contract to legal@acme.example by Friday",
    "Reset your password via the IT portal before the demo",
    "Kunde wünscht Rückruf am Montag",
    "Enviar la cotización actualizada al cliente",
    "Relancer le client pour la facture impayée",
    "Follow up on renewal; budget approved by CFO",
    "",
    "Met at trade fair, interested in the analytics module",
    "PO 4471 received, ship model X200 to warehouse B",
    "See https://crm.acme.example/deals/4411?tab=notes for history",
    "Demo went well, technical contact wants a trial",
    "Pricing approved at 12% discount",
    "Competitor is Initech, we are 8% cheaper",
    "Contract signed, onboarding starts next month",
    "Lost to competitor on price",
    "Waiting for legal review of the DPA",
    "Kunde prüft das Angebot intern",
    "Reunión de seguimiento el martes",
    "Le client a validé le devis",
    "Upsell opportunity for 20 more seats",
    "Champion left the company, need a new contact",
    "Budget freeze until Q2",
]


def realistic_rows(n_rows: int, seed: int = 7) -> tuple[list[str], list[list[str]]]:
    """A deals export: ids, names, companies, amounts, dates, stages, unique emails and a free-text notes column
    (mostly unique too), with the hard negatives of the issue among the notes."""
    rng = random.Random(seed)
    header = ["id", "name", "company", "owner", "amount", "currency", "stage", "close_date", "email", "notes"]
    rows = []
    for i in range(n_rows):
        first, last = rng.choice(FIRST), rng.choice(LAST)
        rows.append(
            [
                str(100000 + i),
                f"{rng.choice(COMPANIES)} – renewal {rng.randint(2024, 2027)}",
                rng.choice(COMPANIES),
                f"{first} {last}",
                f"{rng.uniform(500, 250000):.2f}",
                rng.choice(["EUR", "USD", "GBP"]),
                rng.choice(STAGES),
                f"2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}",
                f"{first.lower()}.{last.lower()}{i}@example.com",
                rng.choice(NOTES)
                + rng.choice(NOTE_TAILS).format(
                    first=rng.choice(FIRST),
                    last=rng.choice(LAST),
                    ref=rng.randint(10000, 99999),
                    date=f"2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}",
                    amount=rng.randint(100, 90000),
                    phone=f"+49 30 {rng.randint(1000000, 9999999)}",
                    company=rng.choice(COMPANIES),
                ),
            ]
        )
    return header, rows


def bench_scan(n_rows: int = 12_000, repeats: int = 5) -> dict[str, Any]:
    header, rows = realistic_rows(n_rows)
    cells = n_rows * len(header)
    wall, cpu = [], []
    for _ in range(repeats):
        clear_caches()  # each repeat starts cold: no score is carried over from the last one
        t0, c0 = time.perf_counter(), time.process_time()
        with encoder.off():
            findings = scan_table(header, rows, path="bench.csv")
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    median = statistics.median(wall)
    return {
        "cells_per_second": round(cells / median),
        # CPU time of this process only: steadier than wall time on a busy machine.
        "cells_per_cpu_second": round(cells / statistics.median(cpu)),
        "cells": cells,
        "repeats": repeats,
        "median_ms": round(median * 1000, 1),
        "findings": len(findings),
        "tiers": "1 (tier 2 is not shipped; tier 3: bench scan-cache)",
    }


if __name__ == "__main__":
    print(bench_scan())
