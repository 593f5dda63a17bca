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

Backups and restores (docs/operating.md). `cleanroom backup` writes a signed `backup SEQ HASH TAKEN SIGNATURE`
line: the head of the database copy it took. A database restored from that copy ends before the anchor does;
`cleanroom audit verify` tells that apart from a deletion (exit 3, "behind the anchor by N entries", naming the
backup; a table whose head is no signed backup point, or whose entries differ from the anchor, is tampering,
exit 1), and `cleanroom audit restored` records the operator's restore as a signed `restored SEQ HASH TAKEN AT
NEWEST SIGNATURE` line: the entries after SEQ up to NEWEST are lost, said by every later verify, and the
anchor goes on from SEQ (its older lines after SEQ no longer count). Both need the signing key, so whoever
can only write the table cannot make a deletion pass as a restore.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
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
BACKUP_POINT = b"cleanroom audit backup point\n"  # then the identity, the seq, the hash and when it was taken
RESTORED = (
    b"cleanroom audit restored\n"  # then the identity, seq, hash, backup taken, restored at, newest lost
)
EMPTY_HEAD = "-"  # the hash of a backup point of an empty trail (seq 0)


@dataclass(frozen=True)
class BackupPoint:
    seq: int
    entry_hash: str
    taken: str  # ISO 8601, UTC


@dataclass(frozen=True)
class Restore:
    seq: int  # the restored database's head
    taken: str  # when its backup was taken
    at: str  # when the operator recorded the restore
    newest: int  # the anchor's newest entry then: seq+1 .. newest were lost

    def describe(self) -> str:
        return (
            f"restored on {self.at} from the backup taken at {self.taken}: entries #{self.seq + 1} to "
            f"#{self.newest} ({self.newest - self.seq}) were lost"
        )


@dataclass(frozen=True)
class Behind:
    """The table ends before the anchor, every entry it has agreeing with it, at a signed backup point."""

    head: int
    newest: int
    point: BackupPoint

    def describe(self) -> str:
        return (
            f"the database is behind the anchor by {self.newest - self.head} entries (#{self.head + 1} to "
            f"#{self.newest}): it is the backup taken at {self.point.taken} (a signed backup point), restored; "
            "those entries were lost. Record the restore with `cleanroom audit restored` (docs/operating.md); "
            "until then the service refuses to start on it"
        )


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
        _write_durably(target, text)
    except OSError as exc:
        log.error(
            "could not anchor audit entries #%s in %s: %s", ", #".join(str(s) for s, _ in lines), target, exc
        )


def _head_message(seq: int, entry_hash: str) -> bytes:
    return SIGNED_HEAD + f"{database_identity()} {seq} {entry_hash}".encode()


def _point_message(seq: int, entry_hash: str, taken: str) -> bytes:
    return BACKUP_POINT + f"{database_identity()} {seq} {entry_hash} {taken}".encode()


def _restored_message(seq: int, entry_hash: str, taken: str, at: str, newest: int) -> bytes:
    return RESTORED + f"{database_identity()} {seq} {entry_hash} {taken} {at} {newest}".encode()


def _append_line(text: str) -> None:
    """One signed line of the operator's (a backup point, a restore), on disk before this returns; unlike an
    entry's line, a failure here is raised: the operator's command fails and says so."""
    _write_durably(path(), text)


def _write_durably(target: Path, text: str) -> None:
    """`text` appended to the anchor file (private, never through a link), on disk before this returns."""
    filemodes.private_dir(target.parent)
    fd = os.open(target, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, filemodes.PRIVATE_FILE)
    try:
        os.write(fd, text.encode("ascii"))
        os.fsync(fd)
    finally:
        os.close(fd)


def now_text() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def mark_backup(seq: int, entry_hash: str | None, taken: str) -> BackupPoint:
    """Record that a backup holds the trail up to entry #seq (`cleanroom backup`, after its copy was taken)."""
    entry_hash = entry_hash or EMPTY_HEAD
    signature = signing.sign(_point_message(seq, entry_hash, taken))
    _append_line(f"backup {seq} {entry_hash} {taken} {signature}\n")
    return BackupPoint(seq, entry_hash, taken)


def _lines() -> list[str]:
    target = path()
    if not target.exists():
        return []
    return target.read_text(encoding="ascii", errors="replace").splitlines()


def backup_points() -> list[BackupPoint]:
    """The signed backup points (a line whose signature does not verify is not one)."""
    points = []
    for line in _lines():
        words = line.split()
        if len(words) == 5 and words[0] == "backup" and words[1].isdigit():
            seq, entry_hash, taken, signature = int(words[1]), words[2], words[3], words[4]
            if signing.verifies(_point_message(seq, entry_hash, taken), signature):
                points.append(BackupPoint(seq, entry_hash, taken))
    return points


def _restore_of(words: list[str]) -> Restore | None:
    """A `restored` line's restore, when its signature verifies."""
    if len(words) != 7 or words[0] != "restored" or not words[1].isdigit() or not words[5].isdigit():
        return None
    seq, entry_hash, taken, at, newest, signature = (
        int(words[1]),
        words[2],
        words[3],
        words[4],
        int(words[5]),
        words[6],
    )
    if not signing.verifies(_restored_message(seq, entry_hash, taken, at, newest), signature):
        return None
    return Restore(seq, taken, at, newest)


def restores() -> list[Restore]:
    """The restores the operator recorded, oldest first."""
    return [r for r in (_restore_of(line.split()) for line in _lines() if line.startswith("restored ")) if r]


def behind(table: dict[int, str]) -> Behind | None:
    """The whole table ends before the anchor, every entry it holds agrees with the anchor, and its head is a
    signed backup point: a restore of that backup (not yet recorded), not a deletion."""
    anchored = read()
    if not anchored:
        return None
    newest, head = max(anchored), (max(table) if table else 0)
    if head >= newest:
        return None
    if _problem(table, {seq: h for seq, h in anchored.items() if seq <= head}, whole=True) is not None:
        return None
    head_hash = table.get(head, EMPTY_HEAD)
    points = [p for p in backup_points() if p.seq == head and p.entry_hash == head_hash]
    return Behind(head, newest, points[-1]) if points else None


def record_restore(table: dict[int, str]) -> Restore:
    """`cleanroom audit restored`: the table is `behind` the anchor at a backup point; write the signed line
    that says so. Anything else is refused (ValueError, saying why)."""
    state = behind(table)
    if state is None:
        raise ValueError(
            "the database is not a restored backup behind this anchor (its head is no signed backup point "
            "with every entry agreeing): nothing to record. `cleanroom audit verify` says what it is"
        )
    at = now_text()
    head_hash = state.point.entry_hash
    message = _restored_message(state.head, head_hash, state.point.taken, at, state.newest)
    _append_line(
        f"restored {state.head} {head_hash} {state.point.taken} {at} {state.newest} {signing.sign(message)}\n"
    )
    return Restore(state.head, state.point.taken, at, state.newest)


def _signed_head(lines: list[str]) -> tuple[int, str, bool, bool] | None:
    """The newest `signed` line, or recorded restore: (seq, hash, whether its signature verifies, whether an
    entry line follows it), or None."""
    for index in range(len(lines) - 1, -1, -1):
        words = lines[index].split()
        after = any(line.split(" ", 1)[0].isdigit() for line in lines[index + 1 :])
        if len(words) == 4 and words[0] == "signed" and words[1].isdigit():
            seq, entry_hash = int(words[1]), words[2]
            return seq, entry_hash, signing.verifies(_head_message(seq, entry_hash), words[3]), after
        if words and words[0] == "restored":
            restore = _restore_of(words)
            if restore is None:
                return 0, "", False, after
            return restore.seq, words[2], True, after
    return None


def _head_problem(anchored: dict[int, str]) -> tuple[int | None, str] | None:
    """What is wrong with the anchor's signed head, or None (also when nothing was ever signed)."""
    target = path()
    if not target.exists():
        return None
    head = _signed_head(target.read_text(encoding="ascii", errors="replace").splitlines())
    if head is None:
        return None
    seq, entry_hash, verified, after = head
    if not verified:
        return (
            seq,
            "the anchor's signed head does not verify with the audit signing key: the anchor file was edited",
        )
    if anchored.get(seq, EMPTY_HEAD if seq == 0 else None) != entry_hash or after:
        return (
            seq,
            "the anchor file was edited after its last signed head (its lines disagree with the signature)",
        )
    return None


def read() -> dict[int, str]:
    """seq -> hash; a later line for the same seq wins (an entry whose insert was rolled back and whose
    seq was taken again). Unreadable lines are skipped."""
    anchored: dict[int, str] = {}
    for line in _lines():
        seq, _, entry_hash = line.strip().partition(" ")
        if seq.isdigit() and len(entry_hash) == 64:
            anchored[int(seq)] = entry_hash
        elif seq == "restored" and (restore := _restore_of(line.split())) is not None:
            # the operator's recorded restore: the trail goes on from its head, the entries after it are lost
            anchored = {s: h for s, h in anchored.items() if s <= restore.seq}
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


def live_anchors() -> list[Path]:
    """The anchor files in the data directory that are not retired (any database's)."""
    folder = get_settings().data_dir / DIRECTORY
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.glob("*.log") if ".retired-" not in p.name)


def start_problem(head: int, head_hash: str | None) -> str | None:
    """Why the service must not start on this database with this anchor (`cleanroom serve`), or None:
    - the database holds entries but no anchor is kept for it: it was moved (a new path or DSN) or restored
      somewhere new, and its anchor would silently start again from whatever comes next;
    - the database is empty, no anchor is kept for it, and the data directory keeps another database's: the
      service was pointed at a new database, and the trail would silently start again;
    - the database ends before its anchor: a restored backup not yet recorded (`cleanroom audit restored`),
      or the newest entries deleted; either way new entries would take the lost ones' numbers.
    `--new-anchor` (`start_new`) is the operator's explicit word for the first two."""
    target = path()
    if not target.exists():
        if head:
            return (
                f"this database ({database_identity()}) holds {head} audit entries but no anchor is kept for "
                f"it in {target.parent}: it was moved or restored to a new path or DSN. Put it back where its "
                "anchor is, or start a new anchor from its current head with --new-anchor (docs/operating.md)"
            )
        others = live_anchors()
        if others:
            return (
                f"this database ({database_identity()}) is new, and the data directory keeps the audit anchor "
                f"of another database ({', '.join(p.name for p in others)}): the service was pointed at a new "
                "database. Point it back (DATABASE_URL / CLEANROOM_DATA_DIR), or start this one's trail with "
                "--new-anchor (docs/operating.md)"
            )
        return None
    anchored = read()
    newest = max(anchored) if anchored else 0
    if head < newest:
        return (
            f"the database ends at audit entry #{head} but its anchor records #{newest}: a restored backup "
            "(record it with `cleanroom audit restored`) or deleted entries. Run `cleanroom audit verify`, "
            "which says which (docs/operating.md)"
        )
    return None


def start_new(head: int, head_hash: str | None) -> Path:
    """The operator's --new-anchor: the anchor starts at the database's current head (its older entries are
    not checked against an anchor any more), or empty for an empty database."""
    target = path()
    if head and head_hash:
        append_many([(head, head_hash)])
    else:
        _append_line("")
    return target


def retire() -> Path | None:
    """A deliberate reset (demo seed --reset) starts a new chain; the old anchor is kept, renamed."""
    target = path()
    if not target.exists():
        return None
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
    retired = target.with_name(f"{target.stem}.retired-{stamp}.log")
    target.rename(retired)
    return retired
