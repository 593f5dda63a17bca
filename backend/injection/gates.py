"""Which rules a text can possibly match, found with C-speed string operations instead of regexes.

Every rule has a gate (rules.GATES): stems at least one of which any match of the rule contains. Stems come
in three kinds:
- "word$": a whole word;
- "word": the beginning of a word;
- anything with punctuation ("<|", "![", "a.i", "os."): a substring, at a word start when it begins with a letter.

Words are found by turning ASCII punctuation into spaces on the UTF-8 bytes and splitting, which costs a few
nanoseconds a character; a whole batch of cells is checked in one go and only cells holding a stem are read
by the rules.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterable

from backend.injection.rules import GATES, REQUIRES, RULES

# ASCII bytes that are not word characters become spaces; non-ASCII bytes (letters of other scripts) stay.
_SPACE_PUNCT = bytes(32 if c < 128 and not (chr(c).isalnum() or c == 95) else c for c in range(256))
_SIMPLE = re.compile(r"[a-z0-9_]+")


def split_words(folded: str) -> list[bytes]:
    return folded.encode("utf-8", "surrogatepass").translate(_SPACE_PUNCT).split()


def _parse(gate: str) -> list[str]:
    return [s.replace("\\|", "|") for s in re.split(r"(?<!\\)\|", gate) if s]


_STEM_RULES: dict[str, set[int]] = {}
for _i, _rule in enumerate(RULES):
    for _stem in _parse(GATES[_rule.name]):
        _STEM_RULES.setdefault(_stem, set()).add(_i)

ALWAYS: frozenset[int] = frozenset(i for i, r in enumerate(RULES) if not GATES[r.name])
WHOLE: dict[bytes, frozenset[int]] = {
    s[:-1].encode(): frozenset(ix)
    for s, ix in _STEM_RULES.items()
    if s.endswith("$") and _SIMPLE.fullmatch(s[:-1])
}
PREFIX: dict[bytes, frozenset[int]] = {
    s.encode(): frozenset(ix) for s, ix in _STEM_RULES.items() if _SIMPLE.fullmatch(s)
}
OTHER: dict[str, frozenset[int]] = {
    s.rstrip("$"): frozenset(ix) for s, ix in _STEM_RULES.items() if not _SIMPLE.fullmatch(s.rstrip("$"))
}
_REQUIRES: dict[int, str] = {i: REQUIRES[r.name] for i, r in enumerate(RULES) if r.name in REQUIRES}
_LENGTHS = tuple(sorted({len(s) for s in PREFIX}))
_HEADS = frozenset(s[:3] for s in PREFIX)  # every prefix stem is at least 3 characters long
assert min(_LENGTHS) >= 3, [s for s in PREFIX if len(s) < 3]


def _stems_of_word(w: bytes) -> Iterable[bytes]:
    return (w[:k] for k in _LENGTHS if k <= len(w) and w[:k] in PREFIX)


LEET = bytes.maketrans(b"0134579", b"oieastg")  # "1gn0r3" → "ignore"


def _has_stem(w: bytes) -> bool:
    return w in WHOLE or (w[:3] in _HEADS and any(_stems_of_word(w)))


def words_with_stems(words: set[bytes]) -> set[bytes]:
    """The words that are, or begin with, a stem, also when digits stand in for letters."""
    found = {w for w in words if _has_stem(w)}
    found.update(
        w
        for w in words
        if len(w) >= 4 and not w.isalpha() and not w.isdigit() and _has_stem(w.translate(LEET))
    )
    return found


def _is_word_char(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


_OTHER_BY_FIRST: dict[str, tuple[str, ...]] = {}
for _stem in OTHER:
    _OTHER_BY_FIRST[_stem[0]] = (*_OTHER_BY_FIRST.get(_stem[0], ()), _stem)


def _other_positions(text: str) -> Iterable[tuple[int, str]]:
    for first, stems in _OTHER_BY_FIRST.items():
        if first not in text:
            continue
        for stem in stems:
            yield from _find_all(text, stem)


def _find_all(text: str, stem: str) -> Iterable[tuple[int, str]]:
    word_led = _is_word_char(stem[0])
    i = text.find(stem)
    while i >= 0:
        if not word_led or i == 0 or not _is_word_char(text[i - 1]):
            yield i, stem
        i = text.find(stem, i + 1)


def rules_for(folded: str) -> set[int]:
    """Indexes of the rules whose gate appears in one folded text."""
    found = set(ALWAYS)
    for w in set(split_words(folded)):
        if w in WHOLE:
            found |= WHOLE[w]
        if w[:3] in _HEADS:
            for stem in _stems_of_word(w):
                found |= PREFIX[stem]
    for first, stems in _OTHER_BY_FIRST.items():
        if first in folded:
            for stem in stems:
                if stem in folded:
                    found |= OTHER[stem]
    return {i for i in found if i not in _REQUIRES or any(ch in folded for ch in _REQUIRES[i])}


def gated(folded: str) -> bool:
    """Whether any rule (other than the always-tried weak ones) could match."""
    return len(rules_for(folded)) > len(ALWAYS)


def cells_with_stems(folded: list[str], joined: str, starts: list[int]) -> set[int]:
    """Indexes of the folded cells (joined with a separator; starts = offsets) that contain any stem."""
    hits: set[int] = set()
    words = words_with_stems(set(joined.encode("utf-8", "surrogatepass").translate(_SPACE_PUNCT).split()))
    for word in words:
        stem = word.decode("utf-8", "surrogatepass")
        i = joined.find(stem)
        n = len(stem)
        while i >= 0:
            before_ok = i == 0 or not _is_word_char(joined[i - 1])
            after_ok = i + n >= len(joined) or not _is_word_char(joined[i + n])
            if before_ok and after_ok:
                hits.add(bisect_right(starts, i) - 1)
            i = joined.find(stem, i + n)
    for i, _stem in _other_positions(joined):
        hits.add(bisect_right(starts, i) - 1)
    return hits
