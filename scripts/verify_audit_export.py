#!/usr/bin/env python3
"""Verify a Cleanroom audit export offline: no database, no Cleanroom install, the standard library only.

    python3 verify_audit_export.py export.jsonl [--head HASH]

An export (`GET /api/audit/export`, `cleanroom audit export`) is JSON Lines: a header, one line per entry,
a footer. This recomputes each entry's hash (sha256 of the entry's fields other than `hash`, as JSON with
sorted keys, no whitespace, UTF-8) and follows each link from the header's starting point: a company's
export links entries by `company_prev_hash`, the whole trail by `prev_hash` with consecutive seqs. The last
entry must be the footer's head, and the head must be the hash the server's anchor file recorded for it.
`--head` also compares the head with one obtained another way; `--includes` requires the chain to pass through
a hash you hold (an earlier export's head, the head the console's audit page showed): a longer, later export
still contains it.

Exit 0 when the export verifies; 1 naming the first bad line (edited, removed, inserted or reordered lines,
a truncated file, a wrong head or anchor); 2 when the file cannot be read.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys

GENESIS = "0" * 64
FORMAT = 1
FIELDS = {"seq", "at", "company_id", "actor", "action", "subject_type", "subject_id", "data", "prev_hash"}
OPTIONAL = {"company_prev_hash"}  # absent on entries written before companies had chains of their own


class Refused(Exception):
    def __init__(self, line: int | None, message: str) -> None:
        super().__init__(f"line {line}: {message}" if line else message)


def entry_hash(entry: dict) -> str:
    """What the server computed when it wrote the entry: every field but `hash`, canonical JSON, sha256."""
    body = {k: v for k, v in entry.items() if k != "hash"}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _is_hash(value: object) -> bool:
    return isinstance(value, str) and len(value) == 64 and all(c in "0123456789abcdef" for c in value)


def _parse(number: int, raw: str) -> dict:
    try:
        value = json.loads(raw)
    except ValueError as exc:
        raise Refused(number, f"not a JSON line ({exc})") from None
    if not isinstance(value, dict):
        raise Refused(number, "not a JSON object")
    return value


def verify(path: str, expected_head: str | None = None, includes: str | None = None) -> dict:
    """The export's facts when it verifies; raises Refused naming the first bad line otherwise."""
    try:
        with open(path, encoding="utf-8") as fh:
            lines = [line.rstrip("\r\n") for line in fh]
    except (OSError, UnicodeDecodeError) as exc:
        raise OSError(f"cannot read {path}: {exc}") from exc
    while lines and not lines[-1].strip():
        lines.pop()
    if not lines:
        raise Refused(None, "the file is empty")
    header = _parse(1, lines[0])
    if header.get("kind") != "header" or header.get("format") != FORMAT:
        raise Refused(1, f"not the header of a Cleanroom audit export (format {FORMAT})")
    scope = header.get("scope")
    if scope not in ("company", "all"):
        raise Refused(1, f"unknown scope {scope!r}")
    company_id = header.get("company_id")
    link = "company_prev_hash" if scope == "company" else "prev_hash"
    start = header.get("start") or {}
    if not _is_hash(start.get("hash")):
        raise Refused(1, "the header has no starting hash")
    prev_hash, prev_seq = start["hash"], start.get("seq")
    if prev_seq is not None and (not isinstance(prev_seq, int) or isinstance(prev_seq, bool)):
        raise Refused(1, "the header's starting seq is not a number")
    count, unlinked, footer = 0, 0, None
    wanted = includes.lower() if includes is not None else None
    passed = wanted == prev_hash  # for --includes: the start or any entry
    for number, raw in enumerate(lines[1:], start=2):
        line = _parse(number, raw)
        if footer is not None:
            raise Refused(number, "a line after the footer (lines were added at the end)")
        if line.get("kind") == "footer":
            footer = (number, line)
            continue
        keys = set(line) - {"hash"}
        if "hash" not in line or not keys >= FIELDS or keys - FIELDS - OPTIONAL:
            raise Refused(number, f"not an audit entry (fields: {', '.join(sorted(line))})")
        seq = line["seq"]
        what = f"entry #{seq}"
        if not isinstance(seq, int) or isinstance(seq, bool):
            raise Refused(number, "its seq is not a number")
        if scope == "company" and line["company_id"] != company_id:
            raise Refused(number, f"{what} belongs to company {line['company_id']}, not {company_id}")
        if scope == "all" and seq != (prev_seq or 0) + 1:
            raise Refused(
                number,
                f"{what} where #{(prev_seq or 0) + 1} belongs: a line was removed, inserted or reordered",
            )
        if prev_seq is not None and seq <= prev_seq:
            raise Refused(number, f"{what} comes after #{prev_seq}: lines were reordered or repeated")
        if entry_hash(line) != line["hash"]:
            raise Refused(number, f"{what} does not match its hash: the line was edited")
        if line.get(link) is None:
            unlinked += 1  # an entry from before the company chains: its own hash only
        elif line[link] != prev_hash:
            raise Refused(
                number,
                f"{what} does not link to the entry before it ({link} {line[link][:12]}…, "
                f"expected {prev_hash[:12]}…): a line before it was removed, inserted or reordered",
            )
        prev_hash, prev_seq, count = line["hash"], seq, count + 1
        passed = passed or wanted == prev_hash
    if footer is None:
        raise Refused(
            len(lines), f"the export ends at line {len(lines)} without its footer: the file was truncated"
        )
    number, line = footer
    head = line.get("head") or {}
    if line.get("count") != count:
        raise Refused(number, f"the footer counts {line.get('count')} entries, the file holds {count}")
    if head.get("hash") != prev_hash or head.get("seq") != prev_seq:
        raise Refused(
            number,
            f"the footer's head (#{head.get('seq')} {str(head.get('hash'))[:12]}…) is not the last entry "
            f"(#{prev_seq} {prev_hash[:12]}…)",
        )
    anchor = line.get("anchor")
    if anchor is not None and (anchor.get("seq") != prev_seq or anchor.get("hash") != prev_hash):
        raise Refused(
            number,
            f"the head (#{prev_seq} {prev_hash[:12]}…) is not the anchored hash "
            f"(#{anchor.get('seq')} {str(anchor.get('hash'))[:12]}…): the chain was rewritten",
        )
    if expected_head is not None and expected_head.lower() != prev_hash:
        raise Refused(number, f"the head {prev_hash} is not the expected {expected_head}")
    if wanted is not None and not passed:
        raise Refused(None, f"the chain does not pass through {includes} (neither its start nor an entry)")
    return {
        "scope": scope,
        "company_id": company_id,
        "count": count,
        "start": start,
        "head": {"seq": prev_seq, "hash": prev_hash},
        "anchored": anchor is not None,
        "unlinked": unlinked,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Verify a Cleanroom audit export (JSON Lines) offline.")
    parser.add_argument("export", help="the .jsonl file")
    parser.add_argument("--head", help="the head hash you expect, obtained another way")
    parser.add_argument(
        "--includes",
        help="a hash the chain must pass through (an earlier export's head, one the console showed)",
    )
    args = parser.parse_args(argv)
    try:
        facts = verify(args.export, args.head, args.includes)
    except OSError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except Refused as exc:
        print(f"audit export REFUSED: {exc}", file=sys.stderr)
        return 1
    scope = "the whole trail" if facts["scope"] == "all" else f"company {facts['company_id']}"
    start, head = facts["start"], facts["head"]
    print(f"audit export OK: {facts['count']} entries of {scope}")
    print(f"starts after: #{start.get('seq') or '-'} {start['hash']}")
    print(f"head: #{head['seq'] or '-'} {head['hash']}")
    if facts["count"] and not facts["anchored"]:
        print("note: the head was not in the server's anchor file; compare it with --head")
    if facts["unlinked"]:
        print(
            f"note: {facts['unlinked']} entries predate per-company links: their hashes and order are "
            "checked, a removed one among them is not noticed"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
