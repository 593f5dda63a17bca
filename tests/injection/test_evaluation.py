"""Recall and false-positive rate on the labelled sets, and the guarantees that make the fast path safe."""

from __future__ import annotations

import pytest

from backend.injection import scan_cell, scan_cells
from backend.injection.bench import bench_scan
from backend.injection.gates import rules_for
from backend.injection.rules import RULES
from backend.injection.text import fold
from tests.injection.corpus import dev_rows
from tests.injection.evaluate import evaluate
from tests.injection.heldout import HARD_NEGATIVES, POSITIVES, heldout_rows
from tests.injection.heldout2 import heldout2_rows
from tests.injection.heldout3 import heldout3_rows
from tests.injection.heldout4 import heldout4_rows
from tests.injection.heldout5 import heldout5_rows
from tests.injection.heldout6 import heldout6_rows
from tests.injection.heldout7 import heldout7_rows
from tests.injection.heldout8 import heldout8_rows
from tests.injection.heldout9 import heldout9_rows
from tests.injection.heldout10 import heldout10_rows
from tests.injection.heldout11 import heldout11_rows
from tests.injection.stress import stress_rows


@pytest.fixture(scope="module")
def dev():
    return dev_rows()


def test_development_set_recall_and_false_positive_rate(dev) -> None:
    score = evaluate(dev)
    assert score.positives >= 500 and score.benign >= 8000
    assert score.recall >= 0.9, score.missed[:20]
    assert score.fpr <= 0.005, score.flagged_benign[:20]


HELD_OUT = [
    heldout_rows,
    heldout2_rows,
    heldout3_rows,
    heldout4_rows,
    heldout5_rows,
    heldout6_rows,
    heldout7_rows,
    heldout8_rows,
    heldout9_rows,
    heldout10_rows,
    heldout11_rows,
]


@pytest.mark.parametrize("rows", HELD_OUT)
def test_held_out_splits_recall_and_false_positive_rate(rows) -> None:
    score = evaluate(rows())
    assert score.recall >= 0.9, score.missed
    assert score.fpr <= 0.005, score.flagged_benign


def test_thousands_of_faker_phrases_in_four_languages_raise_no_warning() -> None:
    pytest.importorskip("faker")
    score = evaluate(stress_rows(n_per_locale=1000))
    assert score.false_alarms == 0, score.flagged_benign


def _all_texts(dev) -> list[str]:
    cells = {cell for r in dev for cell in r.row}
    for split in HELD_OUT:
        cells |= {r.example.text for r in split() if not r.example.source.endswith("ordinary")}
    return sorted(cells | set(POSITIVES) | set(HARD_NEGATIVES))


def test_every_rule_match_is_found_by_its_gate(dev) -> None:
    """A rule is only tried when its gate stems are present; a match without them would be silently lost."""
    misses = []
    for text in _all_texts(dev):
        folded = fold(text)
        gated = rules_for(folded)
        misses += [
            (rule.name, text) for i, rule in enumerate(RULES) if i not in gated and rule.regex.search(folded)
        ]
    assert misses == []


def test_the_batch_prefilter_never_drops_a_finding(dev) -> None:
    texts = _all_texts(dev)
    one_by_one = {i for i, t in enumerate(texts) if scan_cell(t)}
    assert set(scan_cells(texts)) == one_by_one


def test_every_excerpt_fits_the_approval_screen(dev) -> None:
    from backend.injection import scan_table

    lengths = [
        len(f.excerpt) for r in dev if r.example.positive for f in scan_table(r.header, [r.row], path="x.csv")
    ]
    assert lengths and max(lengths) <= 160


def test_benchmark_reports_cells_per_second() -> None:
    result = bench_scan(n_rows=500, repeats=1)
    assert result["cells"] == 5000 and result["cells_per_second"] > 0
