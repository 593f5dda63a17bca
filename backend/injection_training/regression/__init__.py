"""The regression sets: corpus.py (generated development set) and regression_01..11 (hand-written, formerly
"heldout"). All were used to tune the old phrase rules and are part of the learned model's training data, so
their figures are regression checks, not generalization figures (those come from
`python -m backend.injection_training.evaluate`).
"""

from __future__ import annotations

from collections.abc import Callable

from backend.injection_training.regression.corpus import LabelledRow, dev_rows
from backend.injection_training.regression.regression_01 import regression_rows
from backend.injection_training.regression.regression_02 import regression2_rows
from backend.injection_training.regression.regression_03 import regression3_rows
from backend.injection_training.regression.regression_04 import regression4_rows
from backend.injection_training.regression.regression_05 import regression5_rows
from backend.injection_training.regression.regression_06 import regression6_rows
from backend.injection_training.regression.regression_07 import regression7_rows
from backend.injection_training.regression.regression_08 import regression8_rows
from backend.injection_training.regression.regression_09 import regression9_rows
from backend.injection_training.regression.regression_10 import regression10_rows
from backend.injection_training.regression.regression_11 import regression11_rows

SETS: dict[str, Callable[[], list[LabelledRow]]] = {
    "development": dev_rows,
    "regression 01": regression_rows,
    "regression 02": regression2_rows,
    "regression 03": regression3_rows,
    "regression 04": regression4_rows,
    "regression 05": regression5_rows,
    "regression 06": regression6_rows,
    "regression 07": regression7_rows,
    "regression 08": regression8_rows,
    "regression 09": regression9_rows,
    "regression 10": regression10_rows,
    "regression 11": regression11_rows,
}


def labelled_texts() -> tuple[list[str], list[str]]:
    """(positive texts, benign texts) of every regression set: training data for the model."""
    pos: dict[str, None] = {}
    neg: dict[str, None] = {}
    for rows in SETS.values():
        for r in rows():
            (pos if r.example.positive else neg)[r.example.text] = None
            if r.example.positive:
                continue
            for cell in r.row:
                if cell and " " in cell:
                    neg[cell] = None
    return sorted(pos), sorted(t for t in neg if t not in pos)  # sorted: training must not depend on hashing
