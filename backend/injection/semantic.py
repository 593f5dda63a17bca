"""Tier 2 of the scanner: a multilingual semantic scorer that reads what a sentence means, in about a hundred
languages, at roughly the cost of tokenizing it.

The model2vec method without torch: every piece of a multilingual teacher's SentencePiece vocabulary
(multilingual-e5-small, 250,002 pieces) has a vector; a text's vector is the mean of its pieces' vectors, each
weighted down by how frequent the piece is (w = a / (a + p), p the piece's unigram probability); a logistic head
over that vector decides. Because the mean and the head are both linear, the head folds into one number per
piece (g = head · vector), so scoring a text is: split it into pieces, then

    logit = bias + sum(w_i * g_i) / sum(w_i)

No vectors, no matrix products and no NumPy at run time. A long text is also scored over short windows of
pieces (a planted clause in a long note is not diluted by the rest), and the best window is the span.

The artifact `model/semantic.bin.gz` (built by `python -m backend.injection_training.semantic`) holds the
pieces, their SentencePiece scores (quantized to int16, for tokenizing) and their folded head weights
(quantized to int8), with its sha256 in `model/semantic.sha256`, checked on load; `model/MODEL_CARD.md`
("Tier 2") describes data, teacher, licence and figures.

Public surface (kept small for the scanner, the verdict cache and the evaluation harness):
- `judge(texts) -> list[Verdict]`: (score, span, reason) per text, score a probability;
- `flagged(verdict) -> bool` against the artifact's calibrated threshold;
- `fingerprint()`: the artifact's sha256 (a cache of verdicts keys on it).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import math
import struct
import threading
import unicodedata
from array import array
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from backend.injection.model import ModelIntegrityError

ARTIFACT = Path(__file__).with_name("model") / "semantic.bin.gz"
SHA256 = Path(__file__).with_name("model") / "semantic.sha256"
MAGIC = b"CRSEM1\n"

WINDOW = 12  # pieces per window of a long text
STRIDE = 4
MAX_PIECES = 2048  # a longer text is scored on its first MAX_PIECES pieces per chunk (see judge)
SIF_A = 1e-3
META = "\u2581"
# digits read as 0: "Ref 44123" and "Ref 55231" are one text to this tier (scored once, cached)
DIGITS = str.maketrans("123456789", "000000000")
CACHE_LIMIT = 200_000
REASON = "reads like an instruction to an AI assistant (tier 2: what the sentence means, in any language)"


class Verdict(NamedTuple):
    score: float  # probability that the text is an instruction planted for an AI assistant
    span: tuple[int, int] | None  # [start, end) of the best window in the text, None for the whole text
    reason: str


@dataclass
class Semantic:
    pieces: list[str]
    sp_scores: list[float]  # SentencePiece log-probabilities (tokenizing)
    head: list[float]  # folded head: one logit contribution per piece
    bias: float
    threshold: float  # probability
    meta: dict[str, Any] = field(default_factory=dict)
    sha256: str = ""

    def __post_init__(self) -> None:
        self.index = {p: i for i, p in enumerate(self.pieces)}
        self.max_len = max(len(p) for p in self.pieces)
        self.weight = [SIF_A / (SIF_A + math.exp(s)) for s in self.sp_scores]
        self.wg = [w * g for w, g in zip(self.weight, self.head, strict=True)]
        self._words: dict[str, tuple[int, ...]] = {}
        self._best: dict[str, tuple[float, tuple[int, int] | None]] = {}
        self.threshold_logit = math.log(self.threshold / (1 - self.threshold))

    # -- tokenizing --------------------------------------------------------------------------------------
    def word_pieces(self, word: str) -> tuple[int, ...]:
        """The Viterbi (most probable) segmentation of one word ("▁" + word) into vocabulary pieces; a character
        outside the vocabulary is skipped."""
        cached = self._words.get(word)
        if cached is not None:
            return cached
        w = META + word
        n = len(w)
        index, scores, max_len = self.index, self.sp_scores, self.max_len
        best = [0.0] + [-1e30] * n
        back = [(-1, -1)] * (n + 1)
        for i in range(n):
            bi = best[i]
            if bi <= -1e29:
                continue
            for e in range(i + 1, min(n, i + max_len) + 1):
                k = index.get(w[i:e])
                if k is not None:
                    s = bi + scores[k]
                    if s > best[e]:
                        best[e], back[e] = s, (i, k)
            s = bi - 30.0  # an unknown character
            if s > best[i + 1]:
                best[i + 1], back[i + 1] = s, (i, -1)
        out = []
        e = n
        while e > 0:
            i, k = back[e]
            if k >= 0:
                out.append(k)
            e = i
        ids = tuple(reversed(out))
        if len(self._words) < 500_000:
            self._words[word] = ids
        return ids

    def pieces_of(self, text: str) -> tuple[list[int], list[tuple[int, int]]]:
        """Piece ids of a text and, per piece, the [start, end) of its word in the text."""
        ids: list[int] = []
        spans: list[tuple[int, int]] = []
        text = text.translate(DIGITS)
        norm = unicodedata.normalize("NFKC", text).lower() if not text.isascii() else text.lower()
        same = len(norm) == len(text)
        pos = 0
        for word in norm.split():
            start = norm.find(word, pos)
            pos = start + len(word)
            got = self.word_pieces(word)
            ids.extend(got)
            span = (start, pos) if same else (0, len(text))
            spans.extend([span] * len(got))
        return ids, spans

    # -- scoring -----------------------------------------------------------------------------------------
    def logit(self, ids: list[int]) -> float:
        if not ids:
            return -30.0
        wg, w = self.wg, self.weight
        return self.bias + sum(wg[i] for i in ids) / sum(w[i] for i in ids)

    def best(self, text: str) -> tuple[float, tuple[int, int] | None]:
        """(logit, span) of the whole text or, if higher, its best window of WINDOW pieces."""
        key = text.translate(DIGITS)
        got = self._best.get(key)
        if got is None:
            got = self._score(key)
            if len(self._best) < CACHE_LIMIT:
                self._best[key] = got
        return got

    def clear_caches(self) -> None:
        self._words.clear()
        self._best.clear()

    def _score(self, text: str) -> tuple[float, tuple[int, int] | None]:
        ids, spans = self.pieces_of(text)
        if not ids:
            return -30.0, None
        wg, w = self.wg, self.weight
        best = self.bias + sum(wg[i] for i in ids) / sum(w[i] for i in ids)
        span = None
        n = len(ids)
        if n > WINDOW:
            a = [wg[i] for i in ids]
            b = [w[i] for i in ids]
            starts = list(range(0, n - WINDOW + 1, STRIDE))
            if starts[-1] != n - WINDOW:
                starts.append(n - WINDOW)
            for s in starts:
                z = self.bias + sum(a[s : s + WINDOW]) / sum(b[s : s + WINDOW])
                if z > best:
                    best, span = z, (spans[s][0], spans[s + WINDOW - 1][1])
        return best, span

    def judge(self, texts: list[str]) -> list[Verdict]:
        out = []
        for t in texts:
            z, span = self.best(t)
            out.append(Verdict(1.0 / (1.0 + math.exp(-max(-30.0, min(30.0, z)))), span, REASON))
        return out

    # -- artifact ----------------------------------------------------------------------------------------
    def to_bytes(self) -> bytes:
        """gzip(MAGIC, meta JSON line, piece blob, int16 SentencePiece scores, int8 head), deterministic."""
        g_scale = max(abs(g) for g in self.head) / 127 or 1.0
        meta = {
            **self.meta,
            "bias": self.bias,
            "threshold": self.threshold,
            "pieces": len(self.pieces),
            "g_scale": g_scale,
            "sp_scale": 1000,
        }
        blob = "\x00".join(self.pieces).encode("utf-8")
        sp = array("h", [max(-32768, min(32767, round(s * 1000))) for s in self.sp_scores])
        g = array("b", [max(-127, min(127, round(x / g_scale))) for x in self.head])
        raw = b"".join(
            [
                MAGIC,
                json.dumps(meta, sort_keys=True).encode() + b"\n",
                struct.pack("<Q", len(blob)),
                blob,
                sp.tobytes(),
                g.tobytes(),
            ]
        )
        return gzip.compress(raw, compresslevel=9, mtime=0)

    @classmethod
    def from_bytes(cls, data: bytes) -> Semantic:
        raw = gzip.decompress(data)
        if not raw.startswith(MAGIC):
            raise ValueError("not a semantic-tier artifact")
        pos = len(MAGIC)
        end = raw.index(b"\n", pos)
        meta = json.loads(raw[pos:end])
        pos = end + 1
        (n_blob,) = struct.unpack_from("<Q", raw, pos)
        pos += 8
        pieces = raw[pos : pos + n_blob].decode("utf-8").split("\x00")
        pos += n_blob
        n = len(pieces)
        sp = array("h")
        sp.frombytes(raw[pos : pos + 2 * n])
        pos += 2 * n
        g = array("b")
        g.frombytes(raw[pos : pos + n])
        scale, sp_scale = meta["g_scale"], meta["sp_scale"]
        return cls(
            pieces=pieces,
            sp_scores=[s / sp_scale for s in sp],
            head=[x * scale for x in g],
            bias=meta["bias"],
            threshold=meta["threshold"],
            meta=meta,
            sha256=hashlib.sha256(data).hexdigest(),
        )


_LOADED: list[Semantic | None] = []
_LOCK = threading.Lock()


def load() -> Semantic | None:
    """The committed artifact, checked against its pinned sha256 (a mismatch is an error, never a silent
    fallback); None when no artifact is committed."""
    if not ARTIFACT.exists():
        return None
    data = ARTIFACT.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    expected = SHA256.read_text().split()[0]
    if digest != expected:
        raise ModelIntegrityError(
            f"semantic-tier artifact {ARTIFACT} has sha256 {digest}, expected {expected}"
        )
    return Semantic.from_bytes(data)


def model() -> Semantic | None:
    if not _LOADED:
        with _LOCK:
            if not _LOADED:
                _LOADED.append(load())
    return _LOADED[0]


def use(m: Semantic | None) -> None:
    """Swap the scorer (evaluation harness: one per fold); `reset()` goes back to the committed artifact."""
    _LOADED[:] = [m]


def reset() -> None:
    _LOADED.clear()


def judge(texts: list[str]) -> list[Verdict]:
    m = model()
    if m is None:
        return [Verdict(0.0, None, REASON) for _ in texts]
    return m.judge(texts)


def flagged(verdict: Verdict) -> bool:
    m = model()
    return m is not None and verdict.score >= m.threshold


def clear_caches() -> None:
    """Forget cached scores and segmentations (a benchmark's cold start)."""
    if _LOADED and _LOADED[0] is not None:
        _LOADED[0].clear_caches()


def fingerprint() -> str:
    """The sha256 of the scorer in use (the committed artifact's unless the harness swapped it)."""
    m = model()
    return m.sha256 if m is not None else ""
