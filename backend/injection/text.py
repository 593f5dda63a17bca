"""Unicode handling: a matching form of text, invisible-character analysis, and visible excerpts."""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

# Chinese and Japanese (kana, CJK ideographs) and Korean Hangul: scripts written without spaces between words
CJK_CHARS = "\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af"
CJK_RE = re.compile(f"[{CJK_CHARS}]")

# Characters that render as nothing. Soft hyphen is dropped for matching but never reported:
# German and French text carries it legitimately.
ZERO_WIDTH = frozenset(
    "\u200b\u2060\ufeff\u180e\u2061\u2062\u2063\u2064\u034f\u115f\u1160\u3164\uffa0\u17b4\u17b5"
)
JOINERS = frozenset("\u200c\u200d")
BIDI_MARKS = frozenset("\u200e\u200f\u061c")
BIDI_EMBEDDINGS = frozenset("\u202a\u202b\u202c\u2066\u2067\u2068\u2069")
BIDI_OVERRIDES = frozenset("\u202d\u202e")
SOFT = frozenset("\u00ad")
TAG_FIRST, TAG_LAST = 0xE0000, 0xE007F
CANCEL_TAG = 0xE007F
VS_SUPP_FIRST, VS_SUPP_LAST = 0xE0100, 0xE01EF
BLACK_FLAG = "\U0001f3f4"

_INVISIBLE_CLASS = (
    "\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff\u180e\u034f\u115f\u1160\u3164\uffa0"
    "\u17b4\u17b5\u061c\U000e0000-\U000e007f\U000e0100-\U000e01ef"
)
INVISIBLE_RE = re.compile(f"[{_INVISIBLE_CLASS}]")
_RENDER_RE = re.compile(f"([{_INVISIBLE_CLASS}\u00ad\ufe00-\ufe0f])\\1*")
_TAG_RUN_RE = re.compile("[\U000e0000-\U000e007f]+")

# Look-alike letters from other scripts, folded to the Latin letter they imitate.
_CONFUSABLES = {
    "а": "a", "е": "e", "о": "o", "р": "p", "с": "c", "у": "y", "х": "x", "і": "i", "ј": "j",
    "ѕ": "s", "ԁ": "d", "һ": "h", "ӏ": "l", "к": "k", "м": "m", "т": "t", "в": "b", "н": "h",
    "α": "a", "ο": "o", "ε": "e", "ι": "i", "ν": "v", "τ": "t", "κ": "k", "ρ": "p", "υ": "u",
    "ɡ": "g", "ı": "i", "ℓ": "l",
}  # fmt: skip


class _FoldTable(dict):
    """str.translate table built lazily: each character maps to its lower-case, accent-free,
    compatibility-folded Latin form; invisible characters map to nothing."""

    def __missing__(self, code: int) -> str:
        ch = chr(code)
        if INVISIBLE_RE.match(ch) or ch in SOFT or 0xFE00 <= code <= 0xFE0F:
            out = ""
        else:
            folded = unicodedata.normalize("NFKC", ch).casefold()
            folded = "".join(c for c in unicodedata.normalize("NFKD", folded) if not unicodedata.combining(c))
            out = "".join(_CONFUSABLES.get(c, c) for c in folded)
            if ch in "\n\r\u2028\u2029\x85":
                out = "\n" if ch != "\r" else "\r"  # line structure matters ("Assistant:" at a line start)
            elif out.isspace() or unicodedata.category(ch)[0] in "PSZ" and not out.isascii():
                out = " "  # dashes, quotes, symbols and emoji separate words like ASCII punctuation
        self[code] = out
        return out


FOLD = _FoldTable()


def fold(text: str) -> str:
    """The matching form: lower case, no accents, no invisible characters, look-alikes folded."""
    if text.isascii():
        return text.lower()
    return text.translate(FOLD)


def raw_offset(text: str, folded_offset: int) -> int:
    """Map an offset in fold(text) back to an offset in text."""
    if text.isascii():
        return folded_offset
    pos = 0
    for i, ch in enumerate(text):
        pos += len(FOLD[ord(ch)])
        if pos > folded_offset:
            return i
    return len(text)


def _is_complex_script(ch: str) -> bool:
    """Scripts where zero-width joiners and non-joiners are ordinary spelling (Arabic, Persian, Indic, …)."""
    code = ord(ch)
    return 0x0590 <= code <= 0x1CFF or 0xA800 <= code <= 0xABFF or 0xFB1D <= code <= 0xFEFC


def _is_emoji_part(ch: str) -> bool:
    code = ord(ch)
    return (
        code >= 0x1F000
        or 0x2190 <= code <= 0x2BFF
        or code in (0xFE0F, 0x200D, 0x20E3)
        or 0x1F3FB <= code <= 0x1F3FF
    )


def _has_rtl(text: str) -> bool:
    return any(0x0590 <= ord(c) <= 0x08FF or 0xFB1D <= ord(c) <= 0xFEFC for c in text)


@dataclass
class InvisibleReport:
    severity: str  # "high" | "medium" | "low"
    first: int  # offset of the first suspicious character
    hidden_text: str  # text smuggled in tag characters or variation selectors, if any
    stripped: str  # the text with every invisible character removed


def _flag_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of tag runs that form valid emoji flag sequences (e.g. England)."""
    spans = []
    for m in _TAG_RUN_RE.finditer(text):
        s, e = m.span()
        if s > 0 and text[s - 1] == BLACK_FLAG and ord(text[e - 1]) == CANCEL_TAG and e - s <= 8:
            spans.append((s, e))
    return spans


def _decode_variation_selectors(text: str) -> str:
    """Decode 'emoji smuggling': bytes carried as variation selectors after a base character."""
    data = bytearray()
    for ch in text:
        code = ord(ch)
        if 0xFE00 <= code <= 0xFE0F:
            data.append(code - 0xFE00)
        elif VS_SUPP_FIRST <= code <= VS_SUPP_LAST:
            data.append(code - VS_SUPP_FIRST + 16)
    return data.decode("utf-8", errors="ignore") if len(data) >= 4 else ""


def analyse_invisible(text: str) -> InvisibleReport | None:
    """Suspicious invisible characters in text, or None when there are none (or only legitimate ones)."""
    if text.isascii() or not INVISIBLE_RE.search(text):
        return None
    flags = _flag_spans(text)
    in_flag = {i for s, e in flags for i in range(s, e)}
    rtl = None
    worst = 0  # 1 low, 2 medium, 3 high
    first = -1
    count = 0
    hidden_tags = []
    vs_supp = 0
    n = len(text)
    for i, ch in enumerate(text):
        code = ord(ch)
        level = 0
        if TAG_FIRST <= code <= TAG_LAST:
            if i in in_flag:
                continue
            level = 3
            if 0x20 <= code - TAG_FIRST <= 0x7E:
                hidden_tags.append(chr(code - TAG_FIRST))
        elif VS_SUPP_FIRST <= code <= VS_SUPP_LAST:
            prev = text[i - 1] if i else ""
            if prev and (
                unicodedata.name(prev, "").startswith("CJK")
                or VS_SUPP_FIRST <= ord(prev) <= VS_SUPP_LAST
                and vs_supp == 0
            ):
                continue
            vs_supp += 1
            level = 2
        elif ch in ZERO_WIDTH:
            if code == 0xFEFF and (i == 0 or text.count("\ufeff") == 1):
                continue  # a byte-order mark left over from joining files
            level = 2
        elif ch in JOINERS:
            prev = text[i - 1] if i else ""
            nxt = text[i + 1] if i + 1 < n else ""
            if code == 0x200C and ((prev and _is_complex_script(prev)) or (nxt and _is_complex_script(nxt))):
                continue
            if (
                code == 0x200D
                and prev
                and nxt
                and (
                    (_is_emoji_part(prev) and _is_emoji_part(nxt))
                    or (_is_complex_script(prev) or _is_complex_script(nxt))
                )
            ):
                continue
            level = 2
        elif ch in BIDI_MARKS:
            if rtl is None:
                rtl = _has_rtl(text)
            if rtl:
                continue
            level = 1
        elif ch in BIDI_EMBEDDINGS:
            if rtl is None:
                rtl = _has_rtl(text)
            if rtl:
                continue
            level = 2
        elif ch in BIDI_OVERRIDES:
            level = 3
        else:
            continue
        count += 1
        if first < 0:
            first = i
        worst = max(worst, level)
    if not worst:
        return None
    hidden = "".join(hidden_tags)
    if vs_supp:
        hidden = hidden or _decode_variation_selectors(text)
        if len(hidden) >= 2:
            worst = 3
    if worst == 2 and count >= 3:
        worst = 3 if count >= 8 else 2
    if worst == 2 and count == 1 and (first == 0 or first == n - 1):
        worst = 1
    stripped = INVISIBLE_RE.sub("", text)
    return InvisibleReport(("", "low", "medium", "high")[worst], first, hidden, stripped)


def _render_one(m: re.Match[str]) -> str:
    run = m.group(0)
    code = ord(run[0])
    if len(run) == 1:
        return f"<U+{code:04X}>"
    return f"<U+{code:04X}×{len(run)}>"


def render_visible(text: str) -> str:
    """Make invisible characters visible; a run of tag characters shows the text it hides."""
    if text.isascii():
        return text

    def tags(m: re.Match[str]) -> str:
        run = m.group(0)
        s = m.start()
        if s > 0 and text[s - 1] == BLACK_FLAG and ord(run[-1]) == CANCEL_TAG and len(run) <= 8:
            return run  # an emoji flag such as England: leave it alone
        decoded = "".join(chr(ord(c) - TAG_FIRST) for c in run if 0x20 <= ord(c) - TAG_FIRST <= 0x7E)
        return f"<U+E00xx tags:{decoded!r}>"

    text = _TAG_RUN_RE.sub(tags, text)
    return _RENDER_RE.sub(_render_one, text)


def excerpt(text: str, start: int = 0, end: int | None = None, limit: int = 160) -> str:
    """At most `limit` characters of text around [start, end), on one line, invisible characters made visible."""
    end = start if end is None else end
    whole = _oneline(render_visible(text))
    if len(whole) <= limit:
        return whole
    left = max(0, start - 50)
    out = ("…" if left else "") + _oneline(render_visible(text[left : max(end, start) + limit]))
    return out if len(out) <= limit else out[: limit - 1] + "…"


def _oneline(s: str) -> str:
    return s.replace("\r\n", " ⏎ ").replace("\n", " ⏎ ").replace("\r", " ⏎ ")
