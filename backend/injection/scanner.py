"""Scanning cells, tables and text for instructions aimed at the assistant.

A cell is judged by:
1. exact structural checks (structural.py): chat-template tokens, network formulas, Markdown/HTML that
   carries data out, capture services, code that opens shells or connections;
2. the learned model (model.py) over the folded text, window by window, also read through leetspeak and
   letter-spacing; weak structural evidence (a Markdown image, a role line) lowers its bar;
3. invisible characters (text.analyse_invisible), with text hidden in Unicode tags judged too;
4. encodings: base64, hex, %-escapes, HTML entities and rot13 are decoded and judged again (two levels), with
   a lower bar, since someone took the trouble to hide them.

Cost model: repeated values are judged once per batch; a value without a space, a trigger character or a long
token is skipped at the cost of a few `in` tests; only prose (two spaces or more, or CJK text) reaches the
model. A scanner error never escapes for one cell: the caller gets a finding-free result and the error is
raised per file by the staging code.
"""

from __future__ import annotations

import base64
import binascii
import codecs
import html
import math
import re
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from urllib.parse import unquote

from backend.hashing import sha256_text
from backend.injection import categories as c
from backend.injection import encoder, verdicts
from backend.injection.explain import explain_codes
from backend.injection.model import Model, load
from backend.injection.reasons import STRUCTURAL_PREFIX, render
from backend.injection.schemas import Finding, Severity
from backend.injection.structural import structural_hits, with_triggers
from backend.injection.text import CJK_RE, INVISIBLE_RE, analyse_invisible, excerpt, fold, raw_offset

BATCH_CELLS = 16384
HEX_RE = re.compile(r"[0-9a-fA-F]+")
HEX_TOKEN_RE = re.compile(r"(?<![0-9a-zA-Z])[0-9a-fA-F]{16,}(?![0-9a-zA-Z])")
PERCENT_RE = re.compile(r"(?:%[0-9a-fA-F]{2}){3,}")
ENTITY_RE = re.compile(r"&(?:#x?[0-9a-fA-F]{2,6}|lt|gt|quot|amp|apos);")
BASE64_RE = re.compile(r"(?<![A-Za-z0-9+/=_-])[A-Za-z0-9+/_-]{20,}={0,2}")
SPACED_RE = re.compile(r"(?<!\w)(?:\w[ .\-_*/|]{1,3}){5,}\w(?!\w)")
LEETISH_RE = re.compile(r"\b(?=\w*[a-z]\w*[a-z])(?=\w*[0134579])\w{4,}")  # "1gn0r3"; not "A1", "x200", "Q3"
LEET = str.maketrans("0134579", "oieastg")
LEET_L = str.maketrans("0134579", "oleastg")  # 1 reads as i or l
HYPHENATED_RE = re.compile(r"-\n(?=\w)")
LONG_TOKEN_RE = re.compile(r"\S{16}")
ROT13_RE = re.compile(
    r"\b(?:gur|naq|lbh|gb|vf|bs|nyy|vtaber|cerivbhf|vafgehpgvbaf|lbhe)\b"
)  # "the", "and", …
MAX_DEPTH = 2
REPORT = 1.0  # structural weight that is a finding by itself
STRONG = 1.5
WEAK_BOOST = 2.0  # logit added per unit of weak structural evidence
HIDDEN_PROBABILITY = 0.5  # the model's bar for text that was encoded or hidden (its usual bar is higher)
SUSPICIOUS = 0.2  # a line or cell this suspicious is read again together with its neighbours
JOINED = 0.99  # the model's bar for cells read together
WARM = 0.3  # a table cell this suspicious has the other cells of its record, and the rows around it, read with it
HIGH_PROBABILITY = 0.97
# prose (whitespace), markup and escapes, non-ASCII text, or a formula start
LOOK_RE = re.compile(r"[\s<\[#!/%&|{$`\\\u0080-\U0010ffff]|^[=+@\-'\"]")


@dataclass(frozen=True)
class CellHit:
    severity: Severity
    category: str
    excerpt: str
    reason: str = ""
    span: tuple[int, int] | None = None  # [start, end) in the cell's text of the part that scored
    reason_codes: tuple[str, ...] = ()  # `reason` as codes (reasons.py renders them in the reader's language)
    tier: int = 1  # which tier found it: 1 this scanner, 2 the semantic scorer, 3 the full encoder


@dataclass(frozen=True)
class _Judgement:
    hits: list[CellHit]
    probability: float  # the model's best window (0 when it did not run)


_MODEL: list[Model | None] = []
_LOADING = threading.Lock()


def model() -> Model | None:
    """The model, loaded once per process: the first scans of a busy API run in several threads at once,
    and each used to decode the half-megabyte artifact itself."""
    if not _MODEL:
        with _LOADING:
            if not _MODEL:
                _MODEL.append(load())
    return _MODEL[0]


def use_model(m: Model | None) -> None:
    """Swap the model (evaluation harness: leave-one-family-out models)."""
    _MODEL[:] = [m]


def _logistic(z: float) -> float:
    return 1.0 / (1.0 + math.exp(-max(-30.0, min(30.0, z))))


def _worth_model(folded: str) -> bool:
    if folded.count(" ") + folded.count("\n") >= 2:
        return True
    return len(folded) >= 8 and not folded.isascii() and bool(CJK_RE.search(folded))


def _despace(folded: str) -> str | None:
    """'i g n o r e  a l l' → 'ignore all': undo letter-spacing used to dodge word matching."""
    if not SPACED_RE.search(folded):
        return None

    def join(m: re.Match[str]) -> str:
        return re.sub(r"[ .\-_*/|]{1,3}(?=\w)", lambda g: " " if len(g.group(0)) > 1 else "", m.group(0))

    return SPACED_RE.sub(join, folded)


def _variants(folded: str) -> Iterator[str]:
    """Readings of text written to dodge word matching: leetspeak, letter-spacing."""
    if any(d in folded for d in "0134579") and LEETISH_RE.search(folded):
        yield LEETISH_RE.sub(lambda m: m.group(0).translate(LEET), folded)
        if "1" in folded:
            yield LEETISH_RE.sub(
                lambda m: m.group(0).translate(LEET_L if m.group(0).count("1") > 1 else LEET), folded
            )
    if _has_spaced_run(folded):
        despaced = _despace(folded)
        if despaced is not None and despaced != folded:
            yield despaced


def _model_verdict(m: Model, folded: str) -> tuple[float, int, int, str]:
    """(probability, start, end, text scored) of the best window over the text and its variants; start/end are
    offsets into `folded` (the whole text for a variant, whose offsets differ). Weak structural evidence (a
    Markdown image, a role line) raises the score of a text that is already somewhat suspicious."""
    p, s, e = m.best_window(folded)
    if SUSPICIOUS / 4 <= p < m.threshold:
        weak = sum(h.check.weight for h in structural_hits(folded, weak=True))
        if weak:
            p = _logistic(math.log(p / (1 - p)) + WEAK_BOOST * weak)
    best = (p, s, e, folded)
    if p < m.threshold:
        for variant in _variants(folded):
            vp, _, _ = m.best_window(variant)
            if vp > best[0]:
                best = (vp, 0, len(folded), variant)
    return best


def _has_spaced_run(folded: str, run: int = 5) -> bool:
    """Five single characters in a row ("i g n o r e"): letters spaced out to dodge word matching."""
    streak = 0
    for t in folded.split():
        streak = streak + 1 if len(t) == 1 else 0
        if streak >= run:
            return True
    return False


def _focus(m: Model, folded: str, start: int, end: int) -> tuple[int, int]:
    """The sentence of a flagged window that scores highest: what the excerpt is centred on."""
    piece = folded[start:end]
    if len(piece) <= 160:
        return start, end
    best = (-1.0, start, end)
    pos = 0
    for part in re.split(r"(?<=[.!?\n])\s+", piece):
        i = piece.find(part, pos)
        pos = i + len(part)
        if len(part) < 12:
            continue
        p = m.probability(part)
        if p > best[0]:
            best = (p, start + i, start + i + len(part))
    return best[1], best[2]


def _judge(text: str, depth: int = 0, folded: str | None = None, triggered: bool | None = None) -> _Judgement:
    """triggered: whether the text holds a structural trigger, when the caller screened a batch for them."""
    if not text or len(text) < 4 or text.isspace():
        return _Judgement([], 0.0)
    hits: dict[str, CellHit] = {}
    if folded is None:
        folded = fold(text)
    strongest = None
    for h in (
        structural_hits(folded, screened=True)
        if triggered
        else []
        if triggered is False
        else structural_hits(folded)
    ):
        if h.check.category not in hits:
            start, end = raw_offset(text, h.start), raw_offset(text, h.end)
            severity: Severity = "high" if h.check.weight >= STRONG else "medium"
            hits[h.check.category] = CellHit(
                severity,
                h.check.category,
                excerpt(text, start, end),
                h.check.reason,
                (start, end),
                (STRUCTURAL_PREFIX + h.check.name,),
            )
            strongest = strongest or h

    m = model()
    probability = 0.0
    if m is not None and _worth_model(folded):
        p, s, e, scored = _model_verdict(m, folded)
        probability = p
        if p >= m.threshold:
            if scored is folded:
                s, e = _focus(m, folded, s, e)
            category, codes = explain_codes(scored[s:e] if scored is folded else scored)
            start, end = raw_offset(text, s), raw_offset(text, e)
            severity = "high" if p >= HIGH_PROBABILITY or strongest is not None else "medium"
            if category in hits:
                category = c.INSTRUCTION if c.INSTRUCTION not in hits else category
            hits.setdefault(
                category,
                CellHit(
                    severity, category, excerpt(text, start, end), render(codes), (start, end), tuple(codes)
                ),
            )

    if not text.isascii():
        report = analyse_invisible(text)
        if report is not None:
            severity = report.severity  # type: ignore[assignment]
            codes: tuple[str, ...] = ("invisible",)
            if report.hidden_text:
                severity = "high"
                codes = (f"invisible.hidden:{report.hidden_text[:60]}",)
            elif hits:
                severity = "high"
            hits.setdefault(
                c.INVISIBLE,
                CellHit(
                    severity,
                    c.INVISIBLE,
                    excerpt(text, report.first),
                    render(codes),
                    (report.first, report.first + 1),
                    codes,
                ),
            )

    if depth < MAX_DEPTH:
        for start, end, decoded, how in _decoded_variants(text, folded):
            inner = _judge(decoded, depth + 1)
            if inner.hits or inner.probability >= HIDDEN_PROBABILITY:
                shown_inner = inner.hits[0].excerpt if inner.hits else excerpt(decoded)
                label = excerpt(text, start, end, limit=70)
                shown = f"{label} → decodes to: {shown_inner}"
                if len(shown) > 160:
                    shown = shown[:159] + "…"
                hits.setdefault(
                    c.ENCODED,
                    CellHit(
                        "high",
                        c.ENCODED,
                        shown,
                        render([f"encoded:{how}"]),
                        (start, end),
                        (f"encoded:{how}",),
                    ),
                )
                break
    return _Judgement(list(hits.values()), probability)


def scan_cell(text: str, _depth: int = 0) -> list[CellHit]:
    """Findings for one cell or line: at most one per category."""
    return _judge(text, _depth).hits


def _decode_base64(token: str) -> str | None:
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


def _decoded_variants(text: str, folded: str) -> Iterator[tuple[int, int, str, str]]:
    """(start, end, decoded, encoding) for parts of text written in an encoding."""
    if LONG_TOKEN_RE.search(text):
        for m in BASE64_RE.finditer(text):
            decoded = _decode_base64(m.group(0))
            if decoded is not None:
                yield m.start(), m.end(), decoded, "base64"
        for m in HEX_TOKEN_RE.finditer(text):
            decoded = _decode_hex(m.group(0))
            if decoded is not None:
                yield m.start(), m.end(), decoded, "hex"
    if "%" in text and (m := PERCENT_RE.search(text)):
        yield m.start(), m.end(), unquote(text), "percent-encoded"
    if "&" in text and (m := ENTITY_RE.search(text)):
        yield m.start(), m.end(), html.unescape(text), "HTML-entity"
    if text.isascii() and (
        "rot13" in folded or "rot-13" in folded or len(set(ROT13_RE.findall(folded))) >= 2
    ):
        yield 0, len(text), codecs.decode(text, "rot13"), "rot13"


def _needs_look(v: str) -> bool:
    """Whether a value can hold anything worth judging: prose, non-ASCII text, a formula, markup or escapes,
    or a long token that may be base64 or hex (which never hold '@' or '.')."""
    if LOOK_RE.search(v):
        return True
    return len(v) >= 16 and "@" not in v and "." not in v


def _judge_values(values: list[str]) -> dict[str, _Judgement]:
    """Judgements for distinct values (those that need a look): THE function every scan judges its cells and
    lines through. Tier 1 judges every value; the sentence-like values it does not report are then read by tier
    3 (encoder.py), most doubtful first, within the scan's budget (the encoder is loaded when a scan first has
    such a value). With a verdict cache in context (verdicts.using), a value tier 3 judged before under the same
    fingerprint is read from it; the ones tier 3 judges now are stored (tier 1's own verdicts cost less to redo
    than to look up)."""
    look = [v for v in values if len(v) >= 4 and _needs_look(v)]
    judged = _judge_fresh(look)
    if not encoder.wanted():
        return judged
    reachable = [v for v, j in judged.items() if _reachable(v, j)]
    if not reachable:
        return judged
    t3 = encoder.load()
    if t3 is None:
        return judged
    cached = verdicts.current()
    keys: dict[str, str] = {}
    if cached is not None:
        cache, tally = cached
        keys = {v: sha256_text(v) for v in reachable}
        stored = cache.get(list(dict.fromkeys(keys.values())))
        hits = 0
        for v in reachable:
            verdict = stored.get(keys[v])
            if verdict is not None:
                judged[v] = _decode(verdict)
                hits += 1
        tally.add(len(keys), hits)
        budget = tally.budget
        reachable = [v for v in reachable if keys[v] not in stored]
    else:
        budget = encoder.Budget()
    reachable.sort(key=lambda v: -judged[v].probability)
    decided = t3.judge(reachable, budget)
    new = {}
    for v, (logit, s, e) in decided.items():
        judged[v] = _tier3(t3, v, judged[v], logit, s, e)
        if v in keys:
            new[keys[v]] = verdicts.encode(judged[v].probability, judged[v].hits)
    if new:
        cached[0].put(new)  # type: ignore[index]
    return judged


def _reachable(v: str, j: _Judgement) -> bool:
    """Whether tier 3 reads this value: tier 1 does not report it, and it reads like a sentence (not a number,
    a date, a code, an address). Tier 3 only adds findings, so what tier 1 reports is not handed over."""
    return not j.hits and encoder.sentence_like(v)


def _tier3(t3: encoder.Tier3, text: str, j: _Judgement, logit: float, s: int, e: int) -> _Judgement:
    """Tier 3's verdict on a value tier 1 did not report: a finding of its own when its logit reaches the bar.
    The probability stays tier 1's (the cross-cell reading uses it)."""
    if not t3.flags(logit):
        return j
    category, codes = explain_codes(fold(text[s:e]))
    codes = ["semantic", *[code for code in codes if code != "model.instruction"]][:4]
    severity: Severity = (
        "high" if encoder.probability(logit - t3.head.threshold) >= HIGH_PROBABILITY else "medium"
    )
    hit = CellHit(severity, category, excerpt(text, s, e), render(codes), (s, e), tuple(codes), tier=3)
    return _Judgement([hit], j.probability)


def _judge_fresh(look: list[str]) -> dict[str, _Judgement]:
    """Tier 1's judgements of distinct values."""
    out: dict[str, _Judgement] = {}
    folded = [fold(v) for v in look]
    triggered = with_triggers(folded)
    for k, v in enumerate(look):
        out[v] = _judge(v, folded=folded[k], triggered=k in triggered)
    return out


def _decode(verdict: dict) -> _Judgement:
    hits = [
        CellHit(
            **{
                **h,
                "span": tuple(h["span"]) if h.get("span") is not None else None,
                "reason_codes": tuple(h.get("reason_codes") or ()),
            }
        )
        for h in verdict["h"]
    ]
    return _Judgement(hits, verdict["p"])


def scan_cells(cells: list[str]) -> dict[int, list[CellHit]]:
    """Findings per cell index, for cells that have any. Repeated values are judged once."""
    judged = _judge_values([v for v in dict.fromkeys(cells) if v])
    by_value = {v: j.hits for v, j in judged.items() if j.hits}
    if not by_value:
        return {}
    return {i: by_value[cell] for i, cell in enumerate(cells) if cell in by_value}


def _as_text(value: object) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else str(value)


def _finding(
    path: str, sheet: str | None, row: int | None, column: str | None, hit: CellHit, text: str
) -> Finding:
    """`text`: what was judged (the cell, the line, or the cells read together), whose sha256 the finding
    carries: what an acknowledgement is keyed by (backend/injection/acknowledge.py)."""
    return Finding(
        path=path, sheet=sheet, row=row, column=column, cell_sha256=sha256_text(text), **hit.__dict__
    )


def scan_table(
    header: list[str], rows: Iterable[list[str]], *, path: str, sheet: str | None = None
) -> list[Finding]:
    """Findings in a sheet's name, its header cells and every data cell (row 1 is the first row under the header).
    An instruction split over neighbouring cells of a row is reported at its first cell."""
    header = [_as_text(h) for h in header]
    findings: list[Finding] = []
    if sheet:
        findings += [_finding(path, sheet, None, None, hit, sheet) for hit in scan_cell(sheet)]
    for j, hits in sorted(scan_cells(header).items()):
        findings += [_finding(path, sheet, 0, header[j], hit, header[j]) for hit in hits]

    def column_name(j: int) -> str:
        return header[j] if j < len(header) and header[j] else f"column {j + 1}"

    batch: list[list[str]] = []
    first_row = 1

    def flush() -> None:
        texts = [[v if type(v) is str else _as_text(v) for v in row] for row in batch]
        judged = _judge_values([v for v in dict.fromkeys(v for row in texts for v in row) if v])
        hot = {v for v, j in judged.items() if j.hits or j.probability >= min(WARM, SUSPICIOUS)}
        if not hot:
            return  # the usual case: nothing in this batch to report or to read together
        flagged_rows: set[int] = set()
        for r, row in enumerate(texts):
            if hot.isdisjoint(row):
                continue
            flagged = False
            for j, v in enumerate(row):
                judgement = judged.get(v)
                if judgement is not None and judgement.hits:
                    flagged = True
                    findings.extend(
                        _finding(path, sheet, first_row + r, column_name(j), hit, v) for hit in judgement.hits
                    )
            if not flagged:
                found = _split_across_cells(row, judged, path, sheet, first_row + r, column_name)
                found = found or _across_record(row, judged, path, sheet, first_row + r, column_name)
                flagged = bool(found)
                findings.extend(found)
            if flagged:
                flagged_rows.add(r)
        findings.extend(_down_the_column(texts, judged, flagged_rows, path, sheet, first_row, column_name))

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


def _split_across_cells(row, judged, path, sheet, row_number, column_name) -> list[Finding]:
    """Neighbouring cells that are each somewhat suspicious, read together."""
    m = model()
    if m is None:
        return []
    suspicious = [
        j for j, v in enumerate(row) if (jd := judged.get(v)) is not None and jd.probability >= SUSPICIOUS
    ]
    for j in suspicious:
        if j + 1 < len(row) and row[j + 1]:
            hits = _joined_hits([row[j], row[j + 1]])
            if hits:
                text = "\n".join([row[j], row[j + 1]])
                return [_finding(path, sheet, row_number, column_name(j), hit, text) for hit in hits]
    return []


def _warm(judged: dict[str, _Judgement], v: str) -> bool:
    jd = judged.get(v)
    return jd is not None and jd.probability >= WARM


def _joined_hits(parts: list[str]) -> list[CellHit]:
    """Findings for several cells read as one text, when the model is sure of the whole (JOINED): two ordinary
    notes that each come close should not add up to a warning. Spans refer to the joined text, so they are
    dropped."""
    judgement = _judge("\n".join(parts))
    if not judgement.hits or judgement.probability < JOINED:
        return []
    return [replace(h, span=None) for h in judgement.hits]


def _across_record(row, judged, path, sheet, row_number, column_name) -> list[Finding]:
    """The cells of one record read together: an instruction split over several (not only neighbouring) cells
    of a row, each part too weak alone. Reported at the first somewhat suspicious cell."""
    warm = [j for j, v in enumerate(row) if v and _warm(judged, v)]
    if len(warm) < 2:  # two parts that each read somewhat like an instruction
        return []
    prose = [v for v in row if v and (" " in v.strip() or CJK_RE.search(v))]
    if len(prose) < 2:
        return []
    hits = _joined_hits(prose)
    text = "\n".join(prose)
    return [_finding(path, sheet, row_number, column_name(warm[0]), hit, text) for hit in hits]


def _down_the_column(texts, judged, flagged_rows, path, sheet, first_row, column_name) -> list[Finding]:
    """An instruction split over consecutive rows of one column: each somewhat suspicious cell of a row with no
    finding is read together with the cells above and below it. Reported at the first cell of the window."""
    out: list[Finding] = []
    done: set[tuple[int, int]] = set()
    warm_values = {v for v, jd in judged.items() if jd.probability >= WARM}
    if not warm_values:
        return out
    for r, row in enumerate(texts):
        if r in flagged_rows or warm_values.isdisjoint(row):
            continue
        for j, v in enumerate(row):
            if not v or not _warm(judged, v):
                continue
            for lo in (r - 1, r):
                hi = lo + 3
                if lo < 0 or (lo, j) in done:
                    continue
                cells = [
                    (k, texts[k][j])
                    for k in range(lo, min(hi, len(texts)))
                    if j < len(texts[k]) and texts[k][j]
                ]
                if sum(_warm(judged, c) for _, c in cells) < 2 or any(k in flagged_rows for k, _ in cells):
                    continue
                done.add((lo, j))
                hits = _joined_hits([c for _, c in cells])
                if hits:
                    start = cells[0][0]
                    text = "\n".join(c for _, c in cells)
                    out.extend(
                        _finding(path, sheet, first_row + start, column_name(j), hit, text) for hit in hits
                    )
                    flagged_rows.update(k for k, _ in cells)
                    break
    return out


def scan_text(text: str, *, path: str, sheet: str | None = None) -> list[Finding]:
    """Findings line by line (row = 1-based line number). An instruction broken across up to three lines
    is reported at its first line."""
    lines = text.splitlines()
    judged = _judge_values([v for v in dict.fromkeys(lines) if v])
    findings: dict[tuple[int, str], Finding] = {}
    flagged: set[int] = set()
    for i, line in enumerate(lines):
        judgement = judged.get(line)
        if judgement is not None and judgement.hits:
            flagged.add(i)
            for hit in judgement.hits:
                findings[(i, hit.category)] = _finding(path, sheet, i + 1, None, hit, line)

    # A flagged line whose suspicious predecessor completes it: reported at the line the instruction starts on.
    for i in sorted(flagged):
        prev = lines[i - 1] if i else ""
        jd = judged.get(prev)
        if (
            i - 1 in flagged
            or not prev.strip()
            or jd is None
            or (jd.probability < SUSPICIOUS and not prev.endswith("-"))
        ):
            continue
        pair = "\n".join(lines[i - 1 : i + 1])
        if scan_cell(pair) or scan_cell(HYPHENATED_RE.sub("", pair)):
            for key in [k for k in findings if k[0] == i]:
                f = findings.pop(key)
                findings.setdefault(
                    (i - 1, key[1]),
                    f.model_copy(update={"row": i, "span": None, "cell_sha256": sha256_text(pair)}),
                )
            flagged.add(i - 1)

    # An instruction broken over lines: the three-line window around each somewhat suspicious line.
    done: set[int] = set()
    for i, line in enumerate(lines):
        judgement = judged.get(line)
        if judgement is None or judgement.hits or judgement.probability < SUSPICIOUS:
            continue
        lo, hi = max(0, i - 1), min(len(lines), i + 2)
        if lo in done or any(k in flagged for k in range(lo, hi)):
            continue
        done.add(lo)
        # lines read together are held to the bar of cells read together (JOINED): two ordinary lines that
        # each come close (a form's prompt and its title) do not add up to a warning
        window = lines[lo:hi]
        hits = _joined_hits(window) or _joined_hits([HYPHENATED_RE.sub("", "\n".join(window))])
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
                _finding(path, sheet, start + 1, None, replace(hit, span=None), "\n".join(window)),
            )
    return [findings[k] for k in sorted(findings)]
