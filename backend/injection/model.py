"""The learned part of the scanner: a linear model over word and character n-grams of folded text.

Trained by `python -m backend.injection_training.train` (scikit-learn, offline); the artifact
`model/weights.json.gz` holds the non-zero weights by feature name, the bias and the decision threshold, and
its sha256 is pinned in `model/MODEL_CARD.md` and checked on load. Inference is pure Python: the features of
a window are a set of strings, the score is the bias plus the sum of their weights over the square root of
their number (the l2 norm of a binary vector). No network, no downloads.

Long texts are scored in windows (sentences grouped up to WINDOW characters, each window with its
neighbour), and the best window is the span the finding shows.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import math
import re
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import combinations
from pathlib import Path

from backend.injection.lexicon import concepts
from backend.injection.text import CJK_CHARS, CJK_RE

ARTIFACT = Path(__file__).with_name("model") / "weights.json.gz"
SHA256 = Path(__file__).with_name("model") / "weights.sha256"

WINDOW = 320  # characters per chunk; a window is one chunk or two neighbours
SINGLE = 640  # texts up to this length are one window

# CJK runs and runs of other word characters are separate tokens: Chinese and Japanese put no space between a
# number and the words around it, and "清理数据时把发票88213记为已付款" read as one word would become one
# identifier placeholder, the instruction in it lost (and "数字100网络有限公司", a company name, an identifier
# that scored like an encoded payload).
_TOKEN = re.compile(
    rf"https?://\S+|www\.\S+|[\w.+-]+@[\w-]+(?:\.[\w-]+)+|[{CJK_CHARS}]+|[^\W{CJK_CHARS}]+|[^\w\s]"
)
_SENTENCE = re.compile(r"(?<=[.!?:;\n])\s+|\n")


def _token(t: str) -> str:
    c = t[0]
    if len(t) > 4 and (t.startswith(("http", "www.")) and ("://" in t or t.startswith("www."))):
        return "<url>"
    if "@" in t and len(t) > 3 and "." in t:
        return "<email>"
    if c.isdigit():
        if t.isdigit():
            return "<num>" if len(t) < 6 else "<longnum>"
        return "<id>"
    if len(t) >= 8 and sum(ch.isdigit() for ch in t) >= 3:
        return "<id>"
    return t


_TOKEN_CACHE: dict[str, str] = {}
_GRAMS_CACHE: dict[str, tuple[str, ...]] = {}
_CACHE_LIMIT = 200_000


def _normal(t: str) -> str:
    n = _TOKEN_CACHE.get(t)
    if n is None:
        n = _token(t)
        if len(_TOKEN_CACHE) < _CACHE_LIMIT:
            _TOKEN_CACHE[t] = n
    return n


def _grams(t: str) -> tuple[str, ...]:
    g = _GRAMS_CACHE.get(t)
    if g is None:
        n = len(t)
        if n >= 5 and t[0] != "<":
            w = f"[{t}]"
            g = tuple("#" + w[i : i + 4] for i in range(n - 1))
        elif n >= 2 and CJK_RE.search(t):
            g = tuple("#" + t[i : i + 2] for i in range(n - 1))
        else:
            g = ()
        if len(_GRAMS_CACHE) < _CACHE_LIMIT:
            _GRAMS_CACHE[t] = g
    return g


def tokens(folded: str) -> list[str]:
    return [_normal(t) for t in _TOKEN.findall(folded)]


def features(folded: str) -> set[str]:
    """Binary features of one window of folded text: tokens, token bigrams, character 4-grams of words of five
    letters or more (bigrams for CJK), the first token, and a length bucket."""
    return features_of(tokens(folded))


def features_of(toks: list[str]) -> set[str]:
    if not toks:
        return set()
    feats = set(toks)
    feats.update([a + " " + b for a, b in zip(toks, toks[1:], strict=False)])
    for t in set(toks):
        feats.update(_grams(t))
    feats.add("^" + toks[0])
    n = len(toks)
    feats.add(
        "#len" + ("<4" if n < 4 else "<8" if n < 8 else "<16" if n < 16 else "16+")
    )  # calibrates short texts
    return feats


_PLACEHOLDERS = frozenset({"<url>", "<email>", "<id>", "<longnum>"})
# Concepts that point at whoever reads the text (an AI, "whoever processes this", "you", "if you are …", a
# fake automation, its instructions): a window needs one of them for the concept block to speak.
READER_CUES = frozenset({"AI", "READER", "YOU", "COND", "AUTO", "INSTR", "IGNORE"})
_MARKS = {":": "#colon", "[": "#bracket", "|": "#bar", "—": "#dash", "!": "#bang", "?": "#question"}


def concept_features(toks: list[str]) -> set[str]:
    """Features of a window that do not depend on its language (lexicon.py): the concept tags present, every
    pair and triple of them, the order of neighbouring concept words, the tags of the first words (an
    imperative or an address at the start), placeholders (addresses, identifiers), a few marks (a colon early
    on: "Note to …:") and the length. What the text does, not which words it uses. Empty unless something
    in the window points at a reader (READER_CUES)."""
    feats, reader = concept_features_all(toks)
    return feats if reader else set()


def concept_features_all(toks: list[str]) -> tuple[set[str], bool]:
    """The concept features of a window whether or not something points at a reader, and whether something
    does (READER_CUES). The language-independent scorer reads them all; the concept block of the n-gram model
    only when a reader is pointed at."""
    if not toks:
        return set(), False
    feats: set[str] = set()
    seq: list[frozenset[str]] = []
    tags: set[str] = set()
    french = "du" in toks and not _FRENCH.isdisjoint(toks)
    for t in toks:
        c = concepts(t)
        if french and t == "du":
            c = c - _YOU  # French "du" (of the), not German "du" (you)
        if c:
            seq.append(c)
            tags |= c
        elif t in _PLACEHOLDERS:
            feats.add(t)
    reader = not tags.isdisjoint(
        READER_CUES
    )  # else: not the concept block's business (plain business requests)
    if not reader and len(tags) < 2:
        return set(), False  # nor the language-free scorer's (lf_view): one concept is not an instruction
    ordered = sorted(tags)
    feats.update(["@" + a for a in ordered])
    feats.update(["@" + a + "+" + b for a, b in combinations(ordered, 2)])
    if len(ordered) <= 9:
        feats.update(["@" + a + "+" + b + "+" + d for a, b, d in combinations(ordered, 3)])
    for x, y in zip(seq, seq[1:], strict=False):
        feats.update([a + ">" + b for a in x for b in y])
    for t in toks[:3]:
        feats.update(["^@" + a for a in concepts(t)])
    for t in toks[:8]:
        mark = _MARKS.get(t)
        if mark:
            feats.add(mark + "<8")
    n = len(toks)
    feats.add("#n" + ("<4" if n < 4 else "<8" if n < 8 else "<16" if n < 16 else "<32" if n < 32 else "32+"))
    feats.add("#tags" + str(min(len(ordered), 8)))
    return feats, reader


_LF_DROP = frozenset({"<id>", "<longnum>", "#tags1"})
_FRENCH = frozenset(
    {"le", "la", "les", "l", "d", "une", "est", "pour", "dans", "et", "avec", "sur", "au", "aux"}
)  # not de, sv
_YOU = frozenset({"YOU"})


def lf_view(cf: set[str]) -> set[str]:
    """What the language-independent scorer reads of a window's concept features: nothing when a single concept
    speaks (one word doing something is not an instruction: "Update billing address to …"), and no identifier
    or long-number placeholders (attacks quote quote numbers, and so does every CRM note)."""
    if "#tags1" in cf or not cf:
        return set()
    return cf - _LF_DROP


def windows(text: str) -> list[tuple[int, int]]:
    """(start, end) spans to score: the whole text when short, else sentence chunks and neighbour pairs."""
    n = len(text)
    if n <= SINGLE:
        return [(0, n)]
    chunks: list[tuple[int, int]] = []
    start = 0
    last_cut = 0
    for m in _SENTENCE.finditer(text):
        cut = m.end()
        if cut - start > WINDOW:
            end = last_cut if last_cut > start else min(cut, start + WINDOW)
            while end - start > WINDOW:  # a sentence longer than a window: cut it at a space
                space = text.rfind(" ", start + WINDOW // 2, start + WINDOW)
                step = space if space > start else start + WINDOW
                chunks.append((start, step))
                start = step
            if end > start:
                chunks.append((start, end))
                start = end
        last_cut = cut
    while n - start > WINDOW:
        space = text.rfind(" ", start + WINDOW // 2, start + WINDOW)
        step = space if space > start else start + WINDOW
        chunks.append((start, step))
        start = step
    if start < n:
        chunks.append((start, n))
    spans = list(chunks)
    spans += [(a[0], b[1]) for a, b in zip(chunks, chunks[1:], strict=False)]
    return spans


@dataclass
class Model:
    weights: dict[str, float]
    bias: float
    threshold: float  # decision threshold on the probability
    meta: dict
    # Weights of concept_features (language-independent), a second block of the same linear model: normalised
    # by the square root of their own number, so that many unknown words of an unseen language do not dilute them.
    concept_weights: dict[str, float] = field(default_factory=dict)
    # A second scorer over the concept features alone (language-independent: it never sees a word of the
    # text, only what the lexicons say the words do), calibrated on its own; `lf_shift` moves its logit so that
    # its own threshold meets `threshold`. A window's score is the larger of the two, so the n-gram block cannot
    # drown it in an unseen language or wording.
    lf_weights: dict[str, float] = field(default_factory=dict)
    lf_bias: float = 0.0
    lf_shift: float = 0.0

    def __post_init__(self) -> None:
        self._cache: dict[tuple[str, ...], float] = {}
        self._keys = frozenset(self.weights)
        self._concept_keys = frozenset(self.concept_weights)
        self._lf_keys = frozenset(self.lf_weights)

    def logit(self, folded: str) -> float:
        """The score of one window. Texts that differ only in numbers, addresses and identifiers have the same
        tokens, so the score is cached by token sequence (templated notes cost one tokenisation each)."""
        toks = tokens(folded)
        key = tuple(toks)
        z = self._cache.get(key)
        if z is None:
            feats = features_of(toks)
            if feats:
                w = self.weights
                z = self.bias + sum(map(w.__getitem__, feats & self._keys)) / math.sqrt(len(feats))
            else:
                z = self.bias
            if self._concept_keys or self._lf_keys:
                cf, reader = concept_features_all(toks)
                if cf:
                    norm = math.sqrt(len(cf))
                    if reader:
                        z += sum(map(self.concept_weights.__getitem__, cf & self._concept_keys)) / norm
                    lfv = lf_view(cf) if self._lf_keys else None
                    if lfv:
                        lf = self.lf_bias + self.lf_shift
                        lf += sum(map(self.lf_weights.__getitem__, lfv & self._lf_keys)) / math.sqrt(len(lfv))
                        z = max(z, lf)
            if len(self._cache) >= _CACHE_LIMIT:
                self._cache.clear()
            self._cache[key] = z
        return z

    def lf_logit(self, toks: list[str]) -> float | None:
        """The language-independent scorer's logit (shifted), or None when no concept feature speaks."""
        cf = lf_view(concept_features_all(toks)[0])
        if not cf or not self._lf_keys:
            return None
        w = self.lf_weights
        return self.lf_bias + self.lf_shift + sum(map(w.__getitem__, cf & self._lf_keys)) / math.sqrt(len(cf))

    def concept_part(self, toks: list[str]) -> float:
        cf = concept_features(toks)
        if not cf:
            return 0.0
        w = self.concept_weights
        return sum(map(w.__getitem__, cf & self._concept_keys)) / math.sqrt(len(cf))

    def probability(self, folded: str) -> float:
        z = self.logit(folded)
        return 1.0 / (1.0 + math.exp(-max(-30.0, min(30.0, z))))

    def best_window(self, folded: str) -> tuple[float, int, int]:
        """(probability, start, end) of the highest-scoring window."""
        if len(folded) <= SINGLE:
            return self.probability(folded), 0, len(folded)
        best = (-1.0, 0, len(folded))
        seen: dict[str, float] = {}
        for s, e in windows(folded):
            piece = folded[s:e]
            p = seen.get(piece)
            if p is None:
                p = seen[piece] = self.probability(piece)
            if p > best[0]:
                best = (p, s, e)
                if p >= 0.999:
                    break
        return best

    def contributions(self, folded: str) -> list[tuple[str, float]]:
        feats = features(folded)
        norm = math.sqrt(len(feats)) or 1.0
        return sorted(((f, self.weights.get(f, 0.0) / norm) for f in feats), key=lambda x: -x[1])

    def to_json(self) -> bytes:
        body = {
            "bias": self.bias,
            "threshold": self.threshold,
            "meta": self.meta,
            "weights": {k: round(v, 4) for k, v in sorted(self.weights.items())},
            "concept_weights": {k: round(v, 4) for k, v in sorted(self.concept_weights.items())},
        }
        if self.lf_weights:
            body["lf_bias"] = self.lf_bias
            body["lf_shift"] = self.lf_shift
            body["lf_weights"] = {k: round(v, 4) for k, v in sorted(self.lf_weights.items())}
        return gzip.compress(json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode(), mtime=0)

    @classmethod
    def from_json(cls, data: bytes) -> Model:
        body = json.loads(gzip.decompress(data))
        return cls(
            body["weights"],
            body["bias"],
            body["threshold"],
            body.get("meta", {}),
            body.get("concept_weights", {}),
            body.get("lf_weights", {}),
            body.get("lf_bias", 0.0),
            body.get("lf_shift", 0.0),
        )


def clear_caches() -> None:
    """Forget cached scores and token forms (the benchmark measures a cold start on every repeat)."""
    _TOKEN_CACHE.clear()
    _GRAMS_CACHE.clear()
    m = load()
    if m is not None:
        m._cache.clear()


class ModelIntegrityError(RuntimeError):
    pass


@lru_cache(maxsize=1)
def load() -> Model | None:
    """The committed model, or None when no artifact is present (structural checks still run)."""
    if not ARTIFACT.exists():
        return None
    data = ARTIFACT.read_bytes()
    expected = SHA256.read_text().split()[0] if SHA256.exists() else None
    actual = hashlib.sha256(data).hexdigest()
    if expected and expected != actual:
        raise ModelIntegrityError(f"{ARTIFACT} has sha256 {actual}, expected {expected}")
    return Model.from_json(data)
