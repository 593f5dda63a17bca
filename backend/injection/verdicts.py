"""The verdict cache's side in the scanner: what a cached verdict is keyed by, and how the scanner reaches a
cache without its public functions changing.

A verdict is the judgement of one distinct cell or line (its findings and the model's best probability, which
the scanner's cross-cell reading also uses), keyed by the sha256 of the text (backend/hashing.py) and the
scanner's `fingerprint()`: the sha256 of every model artifact in use and of the scanner's own code, so a new
model, a new tier or a changed rule never reads an old verdict. The store (backend/staging/verdict_store.py keeps it
in the database, per company) is handed to the scan with `using(cache)`: a context variable, which
`asyncio.to_thread` carries into the scanning thread. Without one, nothing is cached (`cleanroom scan`, the
evaluation harness).
"""

from __future__ import annotations

import contextvars
import functools
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from backend.hashing import sha256_file, sha256_json
from backend.injection.encoder import Budget

HERE = Path(__file__).parent
# Every model artifact a verdict depends on: a file holding its sha256 ("<hex>  name", as sha256sum writes
# it) or the artifact itself (hashed). A tier's artifact is one more line here.
ARTIFACTS: list[Path] = [
    HERE / "model" / "weights.sha256",  # tier 1: the learned scorer (checked against the weights on load)
    # tier 3: the head over the encoder (it pins the sha256 of the encoder's resource files, checked on load)
    HERE / "model" / "tier3.sha256",
]


# the package's modules that do not judge text (the rest are hashed into the fingerprint, a new tier's too)
NOT_JUDGING = {
    "__init__.py",
    "verdicts.py",
    "store.py",
    "tables.py",
    "acknowledge.py",
    "controller.py",
    "outputs.py",
}


def _artifact_hash(path: Path) -> str:
    if path.suffix == ".sha256":
        return path.read_text().split()[0]
    return sha256_file(path)


@functools.cache
def fingerprint() -> str:
    """sha256 over the hashes of every artifact in ARTIFACTS and of the scanner's source files (the
    structural rules, the explanations, the tiers' code): what a cached verdict was judged by."""
    artifacts = {p.name: _artifact_hash(p) for p in ARTIFACTS if p.exists()}
    code = {p.name: sha256_file(p) for p in sorted(HERE.glob("*.py")) if p.name not in NOT_JUDGING}
    return sha256_json({"artifacts": artifacts, "code": code})


class VerdictCache(Protocol):
    """Synchronous: the scanner runs in a worker thread. `get` returns the stored verdicts of the hashes
    it knows (each as `encode` made it); `put` stores new ones."""

    def get(self, hashes: list[str]) -> dict[str, dict[str, Any]]: ...

    def put(self, verdicts: dict[str, dict[str, Any]]) -> None: ...


@dataclass
class Tally:
    """What a scan asked of the cache: the proposal's scan summary."""

    looked_up: int = 0
    hits: int = 0
    # what tier 3 may still read in this scan (a proposal's, a run's outputs'): shared by its threads
    budget: Budget = field(default_factory=Budget)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, looked_up: int, hits: int) -> None:
        with self.lock:
            self.looked_up += looked_up
            self.hits += hits

    def summary(self) -> dict[str, Any]:
        return {
            "cells_looked_up": self.looked_up,
            "cache_hits": self.hits,
            "hit_rate": round(self.hits / self.looked_up, 4) if self.looked_up else None,
            "fingerprint": fingerprint(),
            **self.budget.summary(),
        }


_CACHE: contextvars.ContextVar[tuple[VerdictCache, Tally] | None] = contextvars.ContextVar(
    "injection_verdict_cache", default=None
)


@contextmanager
def using(cache: VerdictCache, tally: Tally | None = None) -> Iterator[Tally]:
    """Scans in this context (and in threads started from it with asyncio.to_thread) read and fill
    `cache`; the tally counts what they looked up and found."""
    tally = tally or Tally()
    token = _CACHE.set((cache, tally))
    try:
        yield tally
    finally:
        _CACHE.reset(token)


def current() -> tuple[VerdictCache, Tally] | None:
    return _CACHE.get()


def encode(probability: float, hits: list[Any]) -> dict[str, Any]:
    """A judgement as stored: the probability exactly (repr round-trips) and each hit's fields."""
    return {"p": probability, "h": [dict(h.__dict__) for h in hits]}


def dumps(verdict: dict[str, Any]) -> str:
    return json.dumps(verdict, ensure_ascii=False, separators=(",", ":"))
