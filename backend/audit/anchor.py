"""The chain head, anchored outside the database.

A hash chain proves that nothing in the middle changed, but whoever can write the table can delete its
newest entries and leave a shorter chain that verifies. So every entry's "seq hash" is also appended to
a file in the data directory (append-only, fsynced, mode 0600) right after the entry is inserted, and
`cleanroom audit verify` fails when the table ends before the anchor does, or when an anchored entry
carries another hash (the chain was rewritten).

One file per database (the key is a hash of the database's identity, never its password), so a data
directory shared by several databases (tests, a reset demo) keeps their anchors apart.

Each write ends with a `signed SEQ HASH SIGNATURE` line: its newest entry's hash signed with the audit signing
key (backend/audit/signing.py, kept outside the database). The head's hash covers every entry before it
(each links to the one before), so `check` verifies the newest signed line and that no entry line comes
after it: whoever can edit this file but not read the key cannot make it agree with a rewritten table.
Lines written before signing existed are read as before.
"""

from __future__ import annotations

import json
import logging
import os
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from piccolo.engine.sqlite import SQLiteEngine

from backend import filemodes
from backend.audit import signing
from backend.audit.tables import AuditEntry
from backend.hashing import sha256_text
from backend.settings import get_settings

log = logging.getLogger("cleanroom.audit")
DIRECTORY = "audit-anchor"
SIGNED_HEAD = b"cleanroom audit anchor head\n"  # then the database's identity, the seq and the hash


def database_identity() -> str:
    """Which database this is: the SQLite file's absolute path, or the PostgreSQL DSN without password."""
    engine = AuditEntry._meta.db  # the engine the trail is written to
    if isinstance(engine, SQLiteEngine):
        return "sqlite:" + str(Path(engine.path).resolve())
    dsn = str(getattr(engine, "config", {}).get("dsn", ""))
    parts = urlsplit(dsn)
    host = parts.hostname or ""
    netloc = f"{parts.username or ''}@{host}:{parts.port or 5432}"
    return urlunsplit(("postgresql", netloc, parts.path, "", ""))


def path() -> Path:
    return get_settings().data_dir / DIRECTORY / f"{sha256_text(database_identity())[:24]}.log"


def verified_path() -> Path:
    """The last whole-chain verification's outcome for this database (what /metrics reports)."""
    return path().with_suffix(".verified.json")


def record_verified(ok: bool, checked: int, reason: str | None) -> None:
    """Keep the outcome of `cleanroom audit verify` (the operator's periodic check) for /metrics:
    `cleanroom_audit_verify_ok` and the time it ran. A failure to write is logged, never raised."""
    target = verified_path()
    body = {"ok": ok, "checked": checked, "reason": reason, "at": datetime.now(UTC).timestamp()}
    try:
        filemodes.private_dir(target.parent)
        filemodes.write_private(target, json.dumps(body).encode())
    except OSError as exc:
        log.error("could not keep the audit verification's outcome in %s: %s", target, exc)


def last_verified() -> dict | None:
    """{ok, checked, reason, at (unix seconds)} of the last whole-chain verification, or None (never run,
    or unreadable)."""
    try:
        body = json.loads(verified_path().read_text())
    except (OSError, ValueError):
        return None
    return body if isinstance(body, dict) and isinstance(body.get("at"), int | float) else None


def append(seq: int, entry_hash: str) -> None:
    """One entry's line (`append_many` of one)."""
    append_many([(seq, entry_hash)])


def append_many(lines: list[tuple[int, str]]) -> None:
    """One line per entry, on disk (one write, one fsync for them all) before `record` returns. A failure is
    logged, never raised: the entries are in the table already, and a missing line only weakens the check
    for those entries."""
    if not lines:
        return
    target = path()
    text = "".join(f"{seq} {entry_hash}\n" for seq, entry_hash in lines)
    head_seq, head_hash = max(lines)
    try:
        text += f"signed {head_seq} {head_hash} {signing.sign(_head_message(head_seq, head_hash))}\n"
    except Exception as exc:  # noqa: BLE001 - the lines still go in; `check` reports the unsigned head
        log.error("could not sign the audit anchor's head #%s: %s", head_seq, exc)
    try:
        filemodes.private_dir(target.parent)
        fd = os.open(target, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, filemodes.PRIVATE_FILE)
        try:
            os.write(fd, text.encode("ascii"))
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as exc:
        log.error(
            "could not anchor audit entries #%s in %s: %s", ", #".join(str(s) for s, _ in lines), target, exc
        )


def _head_message(seq: int, entry_hash: str) -> bytes:
    return SIGNED_HEAD + f"{database_identity()} {seq} {entry_hash}".encode()


def _signed_head(lines: list[str]) -> tuple[int, str, str, bool] | None:
    """The newest `signed` line: (seq, hash, signature, whether an entry line follows it), or None."""
    for index in range(len(lines) - 1, -1, -1):
        words = lines[index].split()
        if len(words) == 4 and words[0] == "signed" and words[1].isdigit():
            after = any(line.split(" ", 1)[0].isdigit() for line in lines[index + 1 :])
            return int(words[1]), words[2], words[3], after
    return None


def _head_problem(anchored: dict[int, str]) -> tuple[int | None, str] | None:
    """What is wrong with the anchor's signed head, or None (also when nothing was ever signed)."""
    target = path()
    if not target.exists():
        return None
    head = _signed_head(target.read_text(encoding="ascii", errors="replace").splitlines())
    if head is None:
        return None
    seq, entry_hash, signature, after = head
    if not signing.verifies(_head_message(seq, entry_hash), signature):
        return (
            seq,
            "the anchor's signed head does not verify with the audit signing key: the anchor file was edited",
        )
    if anchored.get(seq) != entry_hash or after:
        return (
            seq,
            "the anchor file was edited after its last signed head (its lines disagree with the signature)",
        )
    return None


def read() -> dict[int, str]:
    """seq -> hash; a later line for the same seq wins (an entry whose insert was rolled back and whose
    seq was taken again). Unreadable lines are skipped."""
    anchored: dict[int, str] = {}
    target = path()
    if not target.exists():
        return anchored
    for line in target.read_text(encoding="ascii", errors="replace").splitlines():
        seq, _, entry_hash = line.strip().partition(" ")
        if seq.isdigit() and len(entry_hash) == 64:
            anchored[int(seq)] = entry_hash
    return anchored


def check(table: dict[int, str], *, whole: bool = True) -> tuple[int | None, str] | None:
    """None when the table's entries (seq -> hash) agree with the anchor, else (first bad seq, what is wrong).
    Every entry is checked, not only the head: one the anchor records with another hash was rewritten, and
    one it does not list though it lists entries on both sides of it, or it is newer than the anchor's
    first line, was put into the table behind the anchor's back (or its line was lost: the log says so).
    `whole`: `table` is the whole trail, so it must also reach the anchor's newest entry (a company's
    entries are a part of it, and its reasons name no global seq). An entry appended by another process a moment ago may not be anchored yet:
    what the first reading misses is read again once."""
    return check_counted(table, whole=whole)[0]


def check_counted(table: dict[int, str], *, whole: bool = True) -> tuple[tuple[int | None, str] | None, int]:
    """`check`, and how many of the table's entries the anchor lists (each compared with it)."""
    anchored = read()
    problem = _problem(table, anchored, whole=whole)
    if problem is not None and problem[2]:  # an entry not listed: its line may be on its way
        anchored = read()
        problem = _problem(table, anchored, whole=whole)
    listed = sum(1 for seq in table if seq in anchored)
    if problem is None:
        head = _head_problem(anchored)
        if head is not None:
            return head, listed
    return (None if problem is None else problem[:2]), listed


def _problem(table: dict[int, str], anchored: dict[int, str], *, whole: bool) -> tuple[int, str, bool] | None:
    if not anchored:
        return None
    first, newest = min(anchored), max(anchored)
    head = max(table) if table else 0
    if whole and head < newest:
        return (
            head + 1,
            (
                f"the table ends at entry #{head} but the anchor ({path()}) records entry #{newest}: "
                f"the newest {newest - head} entries were deleted"
            ),
            False,
        )
    named = (lambda seq: f"entry #{seq} ") if whole else (lambda seq: "the entry ")
    for seq in sorted(table):
        if seq in anchored and table[seq] != anchored[seq]:
            return seq, f"{named(seq)}differs from its anchored hash (the chain was rewritten)", False
        if seq not in anchored and seq >= first:
            return (
                seq,
                (
                    f"{named(seq)}is not in the anchor outside the database, which lists every entry since "
                    "before it: it was put into the table behind the anchor's back (or its anchor line was "
                    "lost: the server's log says so)"
                ),
                True,
            )
    return None


def retire() -> Path | None:
    """A deliberate reset (demo seed --reset) starts a new chain; the old anchor is kept, renamed."""
    target = path()
    if not target.exists():
        return None
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
    retired = target.with_name(f"{target.stem}.retired-{stamp}.log")
    target.rename(retired)
    return retired
