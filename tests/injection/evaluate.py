"""`python -m tests.injection.evaluate`: recall and false-positive rate on the regression sets
(backend/injection_training/regression/: corpus.py and regression_*.py; tuned on and trained on, so these are
regression figures), and the scanner's throughput. The public evaluation is
`python -m backend.injection_training.evaluate`."""

from __future__ import annotations

import sys
from collections import defaultdict
from dataclasses import dataclass, field

from backend.benches.scanner import bench_scan
from backend.injection import scan_table
from backend.injection_training.regression import SETS
from backend.injection_training.regression.corpus import LabelledRow


@dataclass
class Score:
    positives: int = 0
    caught: int = 0
    benign: int = 0
    false_alarms: int = 0
    missed: list[str] = field(default_factory=list)
    flagged_benign: list[str] = field(default_factory=list)
    by_source: dict[str, list[int]] = field(default_factory=lambda: defaultdict(lambda: [0, 0]))

    @property
    def recall(self) -> float:
        return self.caught / self.positives if self.positives else 1.0

    @property
    def fpr(self) -> float:
        return self.false_alarms / self.benign if self.benign else 0.0


def flagged_rows(rows: list[LabelledRow]) -> set[int]:
    """Indexes of rows with at least one finding (rows sharing a header are scanned as one table)."""
    groups: dict[tuple[str, ...], list[int]] = defaultdict(list)
    for i, r in enumerate(rows):
        groups[tuple(r.header)].append(i)
    flagged: set[int] = set()
    for header, idxs in groups.items():
        for f in scan_table(list(header), [rows[i].row for i in idxs], path="eval.csv"):
            if f.row:
                flagged.add(idxs[f.row - 1])
    return flagged


def evaluate(rows: list[LabelledRow]) -> Score:
    flagged = flagged_rows(rows)
    s = Score()
    for i, r in enumerate(rows):
        hit = i in flagged
        s.by_source[r.example.source][0] += 1
        s.by_source[r.example.source][1] += hit
        if r.example.positive:
            s.positives += 1
            s.caught += hit
            if not hit:
                s.missed.append(r.example.text)
        else:
            s.benign += 1
            s.false_alarms += hit
            if hit:
                s.flagged_benign.append(r.example.text)
    return s


def _report(name: str, s: Score, verbose: bool) -> None:
    print(
        f"{name}: recall {s.recall:.3f} ({s.caught}/{s.positives})  FPR {s.fpr:.4f} ({s.false_alarms}/{s.benign} benign rows)"
    )
    for source, (n, hit) in sorted(s.by_source.items()):
        print(f"    {source:<18} {hit:>5}/{n:<5} flagged")
    if verbose:
        for t in s.missed:
            print("    MISSED   ", repr(t[:150]))
        for t in sorted(set(s.flagged_benign)):
            print("    FALSE+   ", repr(t[:150]))


def main() -> None:
    verbose = "-v" in sys.argv
    for name, rows in SETS.items():
        _report(name, evaluate(rows()), verbose)
    if "--no-bench" not in sys.argv:
        print("bench:", bench_scan())


if __name__ == "__main__":
    main()
