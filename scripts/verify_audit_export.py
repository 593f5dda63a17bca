#!/usr/bin/env python3
"""Verify a Cleanroom audit export offline: no database, no Cleanroom install, the standard library only.

    python3 verify_audit_export.py export.jsonl --public-key KEY [--head HASH] [--includes HASH]

An export (`GET /api/audit/export`, `cleanroom audit export`) is JSON Lines: a header, one line per entry,
a footer. Its footer is signed with the server's Ed25519 key, kept outside its database. `--public-key` is
required: the key you trust (its base64 as `GET /api/audit/public-key` or `cleanroom audit public-key`
print it, or a file holding that), obtained another way than the export (pin it once; compare its
fingerprint with the console's audit page). Without a signature that verifies against it, nothing in the
file is believed: anyone can recompute hashes.

Then each entry's hash is recomputed (sha256 of canonical JSON: sorted keys, no whitespace, UTF-8) in the
form it was made with, and each link followed from the header's starting point: a company's export links by
`company_prev_hash` with consecutive `company_seq`, the whole trail by `prev_hash` with consecutive `seq`.
Form-2 entries hold their record and output contents as `data_digest` = sha256(salt || canonical contents):
with the values and the salt given, the digest is recomputed; with the values withheld from you (you may
not read the record), the digest stands for them and the line still verifies. The footer's count, head and
digest of every line before it must match, and the server's own check of every entry against its anchor
outside the database must have found nothing. `--head` also compares the head with one obtained another
way; `--includes` requires the chain to pass through a hash you hold (an earlier export's head, the head
the console's audit page showed).

Exit 0 when the export verifies; 1 naming the first bad line (a bad or missing signature, a wrong key,
edited, removed, inserted or reordered lines, a truncated file, a wrong head, an anchor problem); 2 when
the file or the key cannot be read.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import hashlib
import json
import os
import sys

GENESIS = "0" * 64
FORMAT = 2
SIGNED = b"cleanroom audit export footer\n"
# backend/audit/schemas.py: records' values, then the names, hashes and reasons of what a run made
CONTENT_KEYS = (
    "changes",
    "before",
    "stdout",
    "stderr",
    "excerpt",
    "raw",
    "outputs",
    "rejected_files",
    "carried",
    "files",
)
FORM1 = {"seq", "at", "company_id", "actor", "action", "subject_type", "subject_id", "data", "prev_hash"}
FORM1_OPTIONAL = {"company_prev_hash"}  # absent on entries written before companies had chains of their own
FORM2_BODY = (
    "company_id",
    "company_seq",
    "at",
    "actor",
    "action",
    "subject_type",
    "subject_id",
    "company_prev_hash",
)


class Refused(Exception):
    def __init__(self, line: int | None, message: str) -> None:
        super().__init__(f"line {line}: {message}" if line else message)


def canonical(value: object) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# --- Ed25519 verification (RFC 8032, section 6: the reference code, verification only) --------------------

_P = 2**255 - 19
_Q = 2**252 + 27742317777372353535851937790883648493
_D = -121665 * pow(121666, _P - 2, _P) % _P
_SQRT_M1 = pow(2, (_P - 1) // 4, _P)


def _add(a: tuple, b: tuple) -> tuple:
    x = (a[1] - a[0]) * (b[1] - b[0]) % _P
    y = (a[1] + a[0]) * (b[1] + b[0]) % _P
    c = 2 * a[3] * b[3] * _D % _P
    d = 2 * a[2] * b[2] % _P
    e, f, g, h = y - x, d - c, d + c, y + x
    return (e * f % _P, g * h % _P, f * g % _P, e * h % _P)


def _mul(s: int, point: tuple) -> tuple:
    result = (0, 1, 1, 0)
    while s > 0:
        if s & 1:
            result = _add(result, point)
        point = _add(point, point)
        s >>= 1
    return result


def _equal(a: tuple, b: tuple) -> bool:
    return (a[0] * b[2] - b[0] * a[2]) % _P == 0 and (a[1] * b[2] - b[1] * a[2]) % _P == 0


def _recover_x(y: int, sign: int) -> int | None:
    if y >= _P:
        return None
    x2 = (y * y - 1) * pow(_D * y * y + 1, _P - 2, _P) % _P
    if x2 == 0:
        return None if sign else 0
    x = pow(x2, (_P + 3) // 8, _P)
    if (x * x - x2) % _P != 0:
        x = x * _SQRT_M1 % _P
    if (x * x - x2) % _P != 0:
        return None
    if (x & 1) != sign:
        x = _P - x
    return x


def _decompress(data: bytes) -> tuple | None:
    y = int.from_bytes(data, "little")
    sign = y >> 255
    y &= (1 << 255) - 1
    x = _recover_x(y, sign)
    return None if x is None else (x, y, 1, x * y % _P)


_GY = 4 * pow(5, _P - 2, _P) % _P
_GX = _recover_x(_GY, 0)
_G = (_GX, _GY, 1, _GX * _GY % _P)


def ed25519_verify(public: bytes, message: bytes, signature: bytes) -> bool:
    if len(public) != 32 or len(signature) != 64:
        return False
    a = _decompress(public)
    r = _decompress(signature[:32])
    if a is None or r is None:
        return False
    s = int.from_bytes(signature[32:], "little")
    if s >= _Q:
        return False
    h = int.from_bytes(hashlib.sha512(signature[:32] + public + message).digest(), "little") % _Q
    return _equal(_mul(s, _G), _add(r, _mul(h, a)))


def fingerprint(public: bytes) -> str:
    return sha256(public)[:32]


def read_public_key(value: str) -> bytes:
    """The key's base64 (32 raw bytes), or a file holding it (the last word of its text that is one)."""
    text = value
    if os.path.isfile(value):
        with open(value, encoding="ascii", errors="replace") as fh:
            text = fh.read()
    for word in reversed(text.split()):
        try:
            raw = base64.b64decode(word, validate=True)
        except (binascii.Error, ValueError):
            continue
        if len(raw) == 32:
            return raw
    raise OSError(f"no Ed25519 public key (32 bytes, base64) in {value!r}")


# --- entries ----------------------------------------------------------------------------------------------


def contents_digest(salt: str, data: dict) -> str:
    contents = {k: data[k] for k in CONTENT_KEYS if k in data}
    return sha256(bytes.fromhex(salt) + canonical(contents))


def form1_hash(entry: dict) -> str:
    """A form-1 entry's hash: its fields as written (every one but `hash`), verbatim."""
    return sha256(canonical({k: v for k, v in entry.items() if k in FORM1 | FORM1_OPTIONAL}))


def body_hash(entry: dict, number: int) -> str:
    """A form-2 entry's body hash: its facts, its contents as their digest, its company link. Recomputes
    the digest when the salt is given (then the values must be complete)."""
    data = entry.get("data")
    digest = entry.get("data_digest")
    if not isinstance(data, dict) or not _is_hash(digest):
        raise Refused(number, "not a form-2 entry (data, data_digest)")
    if "salt" in entry:
        salt = entry["salt"]
        if not isinstance(salt, str) or len(salt) != 32 or not _is_hex(salt):
            raise Refused(number, "its salt is not 16 bytes of hex")
        if contents_digest(salt, data) != digest:
            raise Refused(
                number, f"entry #{entry.get('company_seq')}'s values do not match their digest: edited"
            )
    elif any(k in data for k in CONTENT_KEYS):
        raise Refused(number, "values are given without their salt: they cannot be checked")
    facts = {k: v for k, v in data.items() if k not in CONTENT_KEYS}
    body = {"form": 2, **{k: entry.get(k) for k in FORM2_BODY}, "data": facts, "data_digest": digest}
    return sha256(canonical(body))


def form2_hash(entry: dict, body: str) -> str:
    return sha256(
        canonical(
            {"form": 2, "seq": entry.get("seq"), "prev_hash": entry.get("prev_hash"), "body_hash": body}
        )
    )


def _is_hex(value: str) -> bool:
    return all(c in "0123456789abcdef" for c in value)


def _is_hash(value: object) -> bool:
    return isinstance(value, str) and len(value) == 64 and _is_hex(value)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _parse(number: int, raw: bytes) -> dict:
    try:
        value = json.loads(raw.decode("utf-8"))
    except ValueError as exc:
        raise Refused(number, f"not a JSON line ({exc})") from None
    if not isinstance(value, dict):
        raise Refused(number, "not a JSON object")
    return value


def _check_signature(number: int, footer: dict, public: bytes) -> None:
    signature = footer.get("signature")
    if not isinstance(signature, str):
        raise Refused(number, "the footer is not signed: nothing in the file can be trusted")
    key = (footer.get("key") or {}) if isinstance(footer.get("key"), dict) else {}
    if key.get("fingerprint") != fingerprint(public):
        raise Refused(
            number,
            f"the export names signing key {key.get('fingerprint')}, not the key you gave "
            f"({fingerprint(public)}): wrong key, or not this server's export",
        )
    try:
        raw = base64.b64decode(signature, validate=True)
    except (binascii.Error, ValueError):
        raw = b""
    unsigned = {k: v for k, v in footer.items() if k != "signature"}
    if not ed25519_verify(public, SIGNED + canonical(unsigned), raw):
        raise Refused(
            number, "the footer's signature does not verify with the key you gave: forged or edited"
        )


def verify(
    path: str, public_key: bytes, expected_head: str | None = None, includes: str | None = None
) -> dict:
    """The export's facts when it verifies; raises Refused naming the first bad line otherwise."""
    try:
        with open(path, "rb") as fh:
            raw_lines = fh.read().split(b"\n")
    except OSError as exc:
        raise OSError(f"cannot read {path}: {exc}") from exc
    while raw_lines and not raw_lines[-1].strip():
        raw_lines.pop()
    if not raw_lines:
        raise Refused(None, "the file is empty")
    # the signature first: until it verifies, no line is believed (each line is its bytes plus "\n")
    number = len(raw_lines)
    footer = _parse(number, raw_lines[-1])
    if footer.get("kind") != "footer":
        raise Refused(number, f"the export ends at line {number} without its footer: the file was truncated")
    _check_signature(number, footer, public_key)
    digest = hashlib.sha256()
    for raw in raw_lines[:-1]:
        digest.update(raw + b"\n")
    lines_match = footer.get("lines_sha256") == digest.hexdigest()

    header = _parse(1, raw_lines[0])
    if header.get("kind") != "header" or header.get("format") != FORMAT:
        raise Refused(1, f"not the header of a Cleanroom audit export (format {FORMAT})")
    scope = header.get("scope")
    if scope not in ("company", "all"):
        raise Refused(1, f"unknown scope {scope!r}")
    company_id = header.get("company_id")
    company = scope == "company"
    number_key, link = ("company_seq", "company_prev_hash") if company else ("seq", "prev_hash")
    start = header.get("start") or {}
    if not _is_hash(start.get("hash")):
        raise Refused(1, "the header has no starting hash")
    prev_hash, prev_no = start["hash"], start.get("seq")
    if prev_no is not None and not _is_int(prev_no):
        raise Refused(1, "the header's starting number is not a number")
    count, unlinked, withheld, unchecked, seen_form2 = 0, 0, 0, 0, False
    wanted = includes.lower() if includes is not None else None
    passed = wanted == prev_hash  # for --includes: the start or any entry
    for number, raw in enumerate(raw_lines[1:-1], start=2):
        line = _parse(number, raw)
        if line.get("kind") == "footer":
            raise Refused(number + 1, "a line after the footer (lines were added at the end)")
        entry_no = line.get(number_key)
        what = f"entry #{entry_no}"
        if not _is_hash(line.get("hash")):
            raise Refused(number, f"not an audit entry (fields: {', '.join(sorted(line))})")
        if company and line.get("company_id") != company_id:
            raise Refused(number, f"{what} belongs to company {line.get('company_id')}, not {company_id}")
        if not _is_int(entry_no):
            raise Refused(number, f"its {number_key} is not a number")
        if entry_no != (prev_no or 0) + 1:
            raise Refused(
                number,
                f"{what} where #{(prev_no or 0) + 1} belongs: a line was removed, inserted or reordered",
            )
        entry_form = line.get("form")
        if entry_form == 1:
            if seen_form2:
                raise Refused(number, f"{what} is in hash form 1 after form 2: the chain changes form once")
            if "data_withheld" in line:
                unchecked += 1  # its hash covers values withheld from you: kept for the links only
            else:
                keys = set(line) - {"hash", "form", "company_seq"}
                if not keys >= FORM1 or keys - FORM1 - FORM1_OPTIONAL:
                    raise Refused(number, f"not a form-1 audit entry (fields: {', '.join(sorted(line))})")
                if form1_hash(line) != line["hash"]:
                    raise Refused(number, f"{what} does not match its hash: the line was edited")
        elif entry_form == 2:
            seen_form2 = True
            body = body_hash(line, number)
            if company:
                if body != line["hash"]:
                    raise Refused(number, f"{what} does not match its hash: the line was edited")
            elif body != line.get("body_hash") or form2_hash(line, body) != line["hash"]:
                raise Refused(number, f"{what} does not match its hash: the line was edited")
            if "data_withheld" in line:
                withheld += 1
        else:
            raise Refused(number, f"{what} has an unknown hash form {entry_form!r}")
        if line.get(link) is None:
            if entry_form == 2 or not company:
                raise Refused(number, f"{what} names no previous entry")
            unlinked += 1  # an entry from before the company chains: its own hash only
        elif line.get(link) != prev_hash:
            raise Refused(
                number,
                f"{what} does not link to the entry before it ({link} {str(line.get(link))[:12]}…, "
                f"expected {prev_hash[:12]}…): a line before it was removed, inserted or reordered",
            )
        prev_hash, prev_no, count = line["hash"], entry_no, count + 1
        passed = passed or wanted == prev_hash
    number = len(raw_lines)
    if not lines_match:
        raise Refused(number, "the lines before the footer are not the ones the server signed: edited")
    head = footer.get("head") or {}
    if footer.get("count") != count:
        raise Refused(number, f"the footer counts {footer.get('count')} entries, the file holds {count}")
    if head.get("hash") != prev_hash or head.get("seq") != prev_no:
        raise Refused(
            number,
            f"the footer's head (#{head.get('seq')} {str(head.get('hash'))[:12]}…) is not the last entry "
            f"(#{prev_no} {prev_hash[:12]}…)",
        )
    anchor = footer.get("anchor") if isinstance(footer.get("anchor"), dict) else None
    if anchor is None:
        raise Refused(number, "the footer does not say what the server's anchor check found")
    if anchor.get("problem"):
        raise Refused(number, f"the server's check against its anchor failed: {anchor['problem']}")
    if expected_head is not None and expected_head.lower() != prev_hash:
        raise Refused(number, f"the head {prev_hash} is not the expected {expected_head}")
    if wanted is not None and not passed:
        raise Refused(None, f"the chain does not pass through {includes} (neither its start nor an entry)")
    return {
        "scope": scope,
        "company_id": company_id,
        "count": count,
        "start": start,
        "head": {"seq": prev_no, "hash": prev_hash},
        "key": fingerprint(public_key),
        "before_anchor": anchor.get("before_anchor") or 0,
        "unlinked": unlinked,
        "withheld": withheld,
        "unchecked": unchecked,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Verify a Cleanroom audit export (JSON Lines) offline.")
    parser.add_argument("export", help="the .jsonl file")
    parser.add_argument(
        "--public-key",
        required=True,
        help="the server's audit signing key you trust: its base64, or a file holding it "
        "(GET /api/audit/public-key, `cleanroom audit public-key`)",
    )
    parser.add_argument("--head", help="the head hash you expect, obtained another way")
    parser.add_argument(
        "--includes",
        help="a hash the chain must pass through (an earlier export's head, one the console showed)",
    )
    args = parser.parse_args(argv)
    try:
        public = read_public_key(args.public_key)
        facts = verify(args.export, public, args.head, args.includes)
    except OSError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except Refused as exc:
        print(f"audit export REFUSED: {exc}", file=sys.stderr)
        return 1
    scope = "the whole trail" if facts["scope"] == "all" else f"company {facts['company_id']}"
    start, head = facts["start"], facts["head"]
    print(f"audit export OK: {facts['count']} entries of {scope}, signed by key {facts['key']}")
    print(f"starts after: #{start.get('seq') or '-'} {start['hash']}")
    print(f"head: #{head['seq'] or '-'} {head['hash']}")
    if facts["withheld"]:
        print(f"note: {facts['withheld']} entries' values are withheld from you; their digests verified")
    if facts["unchecked"]:
        print(
            f"note: {facts['unchecked']} entries from before hash form 2 hold values withheld from you: their "
            "links and the signature are checked, their own hashes cannot be"
        )
    if facts["before_anchor"]:
        print(
            f"note: {facts['before_anchor']} entries are older than the server's anchor: checked by their "
            "hashes and links only"
        )
    if facts["unlinked"]:
        print(
            f"note: {facts['unlinked']} entries predate per-company links: their hashes and order are "
            "checked, a removed one among them is not noticed"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
