"""Scanning cells, tables and text for instructions aimed at the assistant.

Cost model: cells are checked in batches. One regex over a whole batch (ANCHOR_RE, plus a base64 and an
invisible-character check) picks the few cells worth reading; only those go through the weighted rules.
"""

from __future__ import annotations

import base64
import binascii
import html
import re
from bisect import bisect_right
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from urllib.parse import unquote

from backend.injection import categories as c
from backend.injection.gates import cells_with_stems, gated, rules_for
from backend.injection.rules import RULES
from backend.injection.schemas import Finding, Severity
from backend.injection.text import INVISIBLE_RE, analyse_invisible, excerpt, fold, raw_offset

BATCH_CELLS = 16384
SEPARATOR = "\n\x1f"  # a line break, so line-start markers match at the start of every cell
HEX_RE = re.compile(r"[0-9a-fA-F]+")
HEX_TOKEN_RE = re.compile(r"(?<![0-9a-zA-Z])[0-9a-fA-F]{16,}(?![0-9a-zA-Z])")
PERCENT_RE = re.compile(r"(?:%[0-9a-fA-F]{2}){3,}")
ENTITY_RE = re.compile(r"&(?:#x?[0-9a-fA-F]{2,6}|lt|gt|quot|amp|apos);")
BASE64_RE = re.compile(r"(?<![A-Za-z0-9+/=_-])[A-Za-z0-9+/_-]{20,}={0,2}")
SPACED_RE = re.compile(r"(?<!\w)(?:\w[ .\-_*/|]{1,3}){5,}\w(?!\w)")
MAX_DEPTH = 2
HYPHENATED_RE = re.compile(r"-\n(?=\w)")
WINDOW, OVERLAP = 4000, 400  # characters; an instruction longer than the overlap may be split
REPORT, HIGH = 1.0 - 1e-9, 1.5 - 1e-9
HIDDEN_REPORT = (
    0.5 - 1e-9
)  # for text that was encoded or hidden in invisible characters  # score thresholds (weights are sums of tenths)
LEETISH_RE = re.compile(r"\b(?=\w*[a-z]\w*[a-z])(?=\w*[0134579])\w{4,}")  # "1gn0r3", not cell refs like "A1"
LEET = str.maketrans("0134579", "oieastg")
# When rules of equal weight disagree, the finding is named after the more specific category.
_PRIORITY = {
    name: i
    for i, name in enumerate(
        [
            c.ROLE_MARKER,
            c.OVERRIDE,
            c.EXFIL_URL,
            c.FORMULA,
            c.CODE_EXECUTION,
            c.EXFILTRATION,
            c.CONCEALMENT,
            c.ADDRESSED,
            c.INVISIBLE,
            c.ENCODED,
        ]
    )
}

_ORDER = {
    i: rank
    for rank, i in enumerate(
        sorted(range(len(RULES)), key=lambda i: (-RULES[i].weight, _PRIORITY[RULES[i].category], i))
    )
}


@dataclass(frozen=True)
class CellHit:
    severity: Severity
    category: str
    excerpt: str


@dataclass(frozen=True)
class _Verdict:
    severity: Severity
    category: str
    start: int  # offset in the folded text
    end: int
    score: float


def _judge(folded: str) -> _Verdict | None:
    """Apply the weighted rules to folded text. A very long text is judged in overlapping windows, which
    keeps the cost linear whatever the text looks like."""
    if len(folded) <= WINDOW + OVERLAP:
        return _judge_window(folded)
    for start in range(0, len(folded), WINDOW):
        verdict = _judge_window(folded[start : start + WINDOW + OVERLAP])
        if verdict is not None:
            return _Verdict(
                verdict.severity, verdict.category, verdict.start + start, verdict.end + start, verdict.score
            )
    return None


def _judge_window(folded: str) -> _Verdict | None:
    """The weighted rules, strongest first, stopping as soon as the outcome is settled (high severity
    reached, or the rules left cannot add up to a finding)."""
    order = sorted(rules_for(folded), key=_ORDER.__getitem__)
    remaining = sum(RULES[i].weight for i in order)
    if remaining < REPORT:
        return None  # the rules this text could match are all weak ones, and too few of them
    total = 0.0
    best: tuple[int, re.Match[str]] | None = None
    for i in order:
        rule = RULES[i]
        remaining -= rule.weight
        m = rule.regex.search(folded)
        if m is not None:
            total += rule.weight
            if best is None:
                best = (i, m)  # the first match in this order has the greatest weight, then priority
            if total >= HIGH:
                break
        if total + remaining < REPORT:
            return None
    if best is None or total < REPORT:
        return None
    rule, m = RULES[best[0]], best[1]
    return _Verdict("high" if total >= HIGH else "medium", rule.category, m.start(), m.end(), total)


def _partial_score(folded: str) -> float:
    """Sum of the weights of every rule the text matches (no early stop; used only for decoded text)."""
    return sum(RULES[i].weight for i in rules_for(folded) if RULES[i].regex.search(folded))


def _despace(folded: str) -> str | None:
    """'i g n o r e  a l l' → 'ignore all': undo letter-spacing used to dodge keyword matching."""
    if not SPACED_RE.search(folded):
        return None

    def join(m: re.Match[str]) -> str:
        return re.sub(r"[ .\-_*/|]{1,3}(?=\w)", lambda g: " " if len(g.group(0)) > 1 else "", m.group(0))

    return SPACED_RE.sub(join, folded)


def _decode_base64(token: str) -> str | None:
    """The text a base64 token stands for, when it decodes to readable text."""
    raw = token.rstrip("=")
    if len(raw) < 20 or raw.isalpha() or raw.isdigit() or raw.islower() or raw.isupper():
        return None
    padded = raw + "=" * (-len(raw) % 4)
    try:
        data = base64.b64decode(padded, altchars=b"-_" if ("-" in raw or "_" in raw) else None, validate=True)
        text = data.decode("utf-8")
    except (binascii.Error, ValueError):
        return None
    return text if _readable(text) else None


def _decode_hex(token: str) -> str | None:
    if len(token) < 16 or len(token) % 2 or not HEX_RE.fullmatch(token):
        return None
    try:
        text = bytes.fromhex(token).decode("utf-8")
    except ValueError:
        return None
    return text if _readable(text) else None


def _readable(text: str) -> bool:
    """Decoded bytes that read as words (or hide invisible characters), not as binary noise."""
    if len(text) < 8:
        return False
    if INVISIBLE_RE.search(text):
        return True
    printable = sum(ch.isprintable() or ch in "\n\t" for ch in text)
    return printable >= 0.9 * len(text) and bool(re.search(r"[^\W\d_]{2,}\s+[^\W\d_]{2,}", text))


def _decoded_variants(text: str) -> Iterator[tuple[int, int, str]]:
    """(start, end, decoded) for parts of text written in an encoding: base64, hex, %-escapes, HTML entities."""
    if any(len(token) >= 16 for token in text.split()):
        for m in BASE64_RE.finditer(text):
            decoded = _decode_base64(m.group(0))
            if decoded is not None:
                yield m.start(), m.end(), decoded
        for m in HEX_TOKEN_RE.finditer(text):
            decoded = _decode_hex(m.group(0))
            if decoded is not None:
                yield m.start(), m.end(), decoded
    if "%" in text and (m := PERCENT_RE.search(text)):
        yield m.start(), m.end(), unquote(text)
    if "&" in text and (m := ENTITY_RE.search(text)):
        yield m.start(), m.end(), html.unescape(text)


def _hidden_payload_hit(hidden: str, depth: int) -> _Verdict | None:
    return _judge(fold(hidden)) if depth < MAX_DEPTH else None


def scan_cell(text: str, _depth: int = 0) -> list[CellHit]:
    """Findings for one cell or line: at most one per category."""
    if not text or len(text) < 4 or text.isspace():
        return []
    hits: dict[str, CellHit] = {}
    folded = fold(text)

    verdict = _judge(folded)
    if verdict is None and any(d in folded for d in "0134579") and LEETISH_RE.search(folded):
        verdict = _judge(LEETISH_RE.sub(lambda m: m.group(0).translate(LEET), folded))
    if verdict is None and _has_spaced_run(folded.split()):
        despaced = _despace(folded)
        if despaced is not None:
            spaced_verdict = _judge(despaced)
            if spaced_verdict is not None:
                hits[spaced_verdict.category] = CellHit(
                    spaced_verdict.severity, spaced_verdict.category, excerpt(text)
                )
    if verdict is not None:
        start = raw_offset(text, verdict.start)
        end = raw_offset(text, verdict.end)
        hits[verdict.category] = CellHit(verdict.severity, verdict.category, excerpt(text, start, end))

    if not text.isascii():
        report = analyse_invisible(text)
        if report is not None:
            severity: Severity = report.severity  # type: ignore[assignment]
            if report.hidden_text or verdict is not None:
                severity = "high"
            shown = excerpt(text, report.first)
            if report.hidden_text:
                hidden = _hidden_payload_hit(report.hidden_text, _depth)
                if hidden is not None:
                    severity = "high"
            hits.setdefault(c.INVISIBLE, CellHit(severity, c.INVISIBLE, shown))

    if _depth < MAX_DEPTH:
        for start, end, decoded in _decoded_variants(text):
            inner = scan_cell(decoded, _depth + 1)
            if not inner and _partial_score(fold(decoded)) >= HIDDEN_REPORT:
                # Someone encoded it: half the usual evidence is enough.
                inner = [CellHit("high", c.ENCODED, excerpt(decoded))]
            if inner:
                label = excerpt(text, start, end, limit=70)
                shown = f"{label} → decodes to: {inner[0].excerpt}"
                if len(shown) > 160:
                    shown = shown[:159] + "…"
                hits.setdefault(c.ENCODED, CellHit("high", c.ENCODED, shown))
                break
    return list(hits.values())


B64_TOKEN = re.compile(r"[a-z0-9+/_-]{20,}")


def _candidates(values: list[str]) -> list[int]:
    """Indexes of the values worth a full look. A handful of C-speed passes over the whole batch; everything
    else is ordinary data and costs nothing more."""
    folded = [fold(v) for v in values]
    joined = SEPARATOR.join(folded)
    starts = _starts(folded)
    hits = cells_with_stems(folded, joined, starts)

    tokens = joined.split()
    for token in {t for t in tokens if len(t) >= 20}:
        if B64_TOKEN.search(token):
            i = joined.find(token)
            while i >= 0:
                hits.add(bisect_right(starts, i) - 1)
                i = joined.find(token, i + 1)
    if _has_spaced_run(tokens):
        for m in SPACED_RE.finditer(joined):
            hits.add(bisect_right(starts, m.start()) - 1)

    for marker, regex in (("%", PERCENT_RE), ("&", ENTITY_RE)):
        if marker in joined:
            for m in regex.finditer(joined):
                hits.add(bisect_right(starts, m.start()) - 1)

    unusual = [i for i, v in enumerate(values) if not v.isascii()]
    if unusual:
        raw = [values[i] for i in unusual]
        raw_starts = _starts(raw)
        for m in INVISIBLE_RE.finditer(SEPARATOR.join(raw)):
            hits.add(unusual[bisect_right(raw_starts, m.start()) - 1])
    return sorted(hits)


def _has_spaced_run(tokens: list[str], run: int = 5) -> bool:
    """Five single characters in a row ("i g n o r e"): letters spaced out to dodge word matching."""
    ones = [i for i, t in enumerate(tokens) if len(t) == 1]
    streak = 1
    for a, b in zip(ones, ones[1:], strict=False):
        streak = streak + 1 if b == a + 1 else 1
        if streak >= run:
            return True
    return False


def _starts(parts: list[str]) -> list[int]:
    starts = []
    pos = 0
    step = len(SEPARATOR)
    for part in parts:
        starts.append(pos)
        pos += len(part) + step
    return starts


def scan_cells(cells: list[str]) -> dict[int, list[CellHit]]:
    """Findings per cell index, for cells that have any. Repeated values (stages, currencies, owners) are
    looked at once."""
    values = [v for v in dict.fromkeys(cells) if v]
    by_value: dict[str, list[CellHit]] = {}
    for k in _candidates(values):
        hits = scan_cell(values[k])
        if hits:
            by_value[values[k]] = hits
    if not by_value:
        return {}
    return {i: by_value[cell] for i, cell in enumerate(cells) if cell in by_value}


def _as_text(value: object) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else str(value)


def scan_table(
    header: list[str], rows: Iterable[list[str]], *, path: str, sheet: str | None = None
) -> list[Finding]:
    """Findings in a sheet's name, its header cells and every data cell (row 1 is the first row under the header)."""
    header = [_as_text(h) for h in header]
    findings: list[Finding] = []
    if sheet:
        for hit in scan_cell(sheet):
            findings.append(Finding(path=path, sheet=sheet, row=None, column=None, **hit.__dict__))
    for j, hits in sorted(scan_cells(header).items()):
        for hit in hits:
            findings.append(Finding(path=path, sheet=sheet, row=0, column=header[j], **hit.__dict__))

    def column_name(j: int) -> str:
        return header[j] if j < len(header) and header[j] else f"column {j + 1}"

    batch: list[list[str]] = []  # rows
    first_row = 1

    def flush() -> None:
        cells = [v if type(v) is str else _as_text(v) for row in batch for v in row]
        starts = []  # index of each row's first cell in `cells`
        pos = 0
        for row in batch:
            starts.append(pos)
            pos += len(row)
        for k, hits in sorted(scan_cells(cells).items()):
            r = bisect_right(starts, k) - 1
            j = k - starts[r]
            for hit in hits:
                findings.append(
                    Finding(path=path, sheet=sheet, row=first_row + r, column=column_name(j), **hit.__dict__)
                )

    size = 0
    for row in rows:
        batch.append(row)
        size += len(row)
        if size >= BATCH_CELLS:
            flush()
            first_row += len(batch)
            batch, size = [], 0
    flush()
    return findings


def scan_text(text: str, *, path: str, sheet: str | None = None) -> list[Finding]:
    """Findings line by line (row = 1-based line number). An instruction broken across up to three lines
    is reported at its first line."""
    lines = text.splitlines()
    per_line = scan_cells(lines)
    findings: dict[tuple[int, str], Finding] = {}
    for i, hits in per_line.items():
        for hit in hits:
            findings[(i, hit.category)] = Finding(
                path=path, sheet=sheet, row=i + 1, column=None, **hit.__dict__
            )

    # An instruction broken over lines: one three-line window around each line that holds a gate word; only
    # when that window has a finding are the two-line windows tried, to name the line it starts on.
    seen: set[int] = set()
    for i in range(len(lines)):
        lo, hi = max(0, i - 1), min(len(lines), i + 2)
        if hi - lo < 2 or lo in seen or not lines[i].strip() or not gated(fold(lines[i])):
            continue
        seen.add(lo)
        if any(k in per_line for k in range(lo, hi)):
            continue  # a line here already has its own finding
        window = "\n".join(lines[lo:hi])
        hits = scan_cell(window)
        if not hits and "-\n" in window:
            hits = scan_cell(HYPHENATED_RE.sub("", window))  # OCR and PDF text break words at line ends
        if not hits:
            continue
        start = lo
        for a in range(lo, hi - 1):
            pair = "\n".join(lines[a : a + 2])
            if scan_cell(pair) or scan_cell(HYPHENATED_RE.sub("", pair)):
                start = a
                break
        for hit in hits:
            findings.setdefault(
                (start, hit.category),
                Finding(path=path, sheet=sheet, row=start + 1, column=None, **hit.__dict__),
            )
    return [findings[k] for k in sorted(findings)]
