"""The audit export verifies offline, with the stand-alone verifier (scripts/verify_audit_export.py, stdlib
only) and the server's public key given to it, and any edit to it is refused naming the line. The entries
are made through the real API on a real database; the verifier runs as its own process with no
site-packages, copied away from the repository, so it cannot lean on the backend. The hostile parties:
whoever edits an export file or fabricates one, whoever rewrites the database, a member who is not an
admin, and another company's admin."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from typing import Any

import pytest

from backend.audit import export, signing
from backend.audit import service as audit
from backend.audit.tables import AuditEntry
from backend.tenancy.tables import Company
from tests.support.audit import VERIFIER, _verifier_module, _verify
from tests.support.http import login, token_for


async def _company_id(name: str) -> int:
    return (await Company.select(Company.id).where(Company.name == name).first())["id"]


async def _activity(client) -> None:
    """Entries of both companies, interleaved, through the API; and one whose data is awkward to hash
    (non-ASCII, floats, nesting, a quote), recorded by the service every package writes through."""
    await login(client, "admin@acme.example")
    response = await client.patch("/api/company/settings", json={"followup_grant_hours": 12})
    assert response.status_code == 200, response.text
    client.cookies.clear()
    await login(client, "admin@globex.example")
    client.cookies.clear()
    await token_for(client, "alice@acme.example")  # a login and a token.created of Acme's
    await audit.record(
        "test.awkward",
        actor="admin@acme.example",
        company_id=await _company_id("Acme Analytics"),
        subject_type="run",
        subject_id=7,
        data={
            "name": 'Zoë\'s "Q1" – 売上',
            "ratio": 0.1,
            "big": 2**53 + 1,
            "nested": {"b": [1, 2.5], "a": None},
        },
    )
    await login(client, "admin@globex.example")
    client.cookies.clear()


async def _export(client, email: str = "admin@acme.example", **params: str) -> list[str]:
    client.cookies.clear()
    await login(client, email)
    response = await client.get("/api/audit/export", params=params)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("application/jsonl")
    assert "attachment" in response.headers["content-disposition"]
    return response.text.splitlines()


async def test_an_export_verifies_offline_and_the_verifier_agrees_with_the_backend(client, tmp_path) -> None:
    await _activity(client)
    acme = await _company_id("Acme Analytics")
    lines = await _export(client)
    before = (
        await AuditEntry.select()
        .where(AuditEntry.company_id == acme)
        .where(AuditEntry.action != "audit.exported")
        .order_by(AuditEntry.seq)
    )
    result = _verify(tmp_path, lines)
    assert result.returncode == 0, result.stderr  # positive control: the untouched export verifies
    assert "audit export OK" in result.stdout and f"company {acme}" in result.stdout

    header, entries, footer = (
        json.loads(lines[0]),
        [json.loads(x) for x in lines[1:-1]],
        json.loads(lines[-1]),
    )
    assert header["kind"] == "header" and header["scope"] == "company" and header["company_id"] == acme
    assert header["start"] == {"seq": None, "hash": audit.GENESIS}
    # every entry of the company up to the export, in order, and nothing else
    assert [e["company_seq"] for e in entries] == [r["company_seq"] for r in before]
    verifier = _verifier_module()
    for number, (entry, row) in enumerate(zip(entries, before, strict=True), start=2):
        # the verifier's hash of the exported line, the backend's of the database row, and the stored hashes:
        # a company's line carries the body hash (its company's link), the global hash covers it
        assert entry["form"] == row["hash_form"] == 2 and entry["company_seq"] == row["company_seq"]
        assert verifier.body_hash(entry, number) == audit.body_hash(row) == row["body_hash"] == entry["hash"]
        assert audit.entry_hash(row) == row["hash"]
        assert "seq" not in entry and "prev_hash" not in entry  # D-L6: no global seq, no other company's hash
    assert any(e["action"] == "test.awkward" for e in entries)
    assert any(e["action"] == "settings.changed" for e in entries)
    assert [e["company_seq"] for e in entries] == list(range(1, len(before) + 1))
    # D-L6: Globex's entries fall between Acme's (the global seqs have gaps: the control), yet neither the
    # export nor the browsed trail shows them: Acme's own numbering, no global seq, no row id, no prev_hash
    assert [r["seq"] for r in before] != list(range(before[0]["seq"], before[0]["seq"] + len(before)))
    browsed = (await client.get("/api/audit", params={"limit": 1000})).json()
    assert browsed[0]["action"] == "audit.exported"  # the export's own entry, after its range
    assert [e["seq"] for e in browsed] == list(range(len(before) + 1, 0, -1))
    assert not {"prev_hash", "id"} & set(browsed[0]) and '"prev_hash"' not in "\n".join(lines)
    assert [e["hash"] for e in browsed[1:]] == [e["hash"] for e in reversed(entries)]  # the export's
    assert footer["count"] == len(before)
    assert footer["head"] == {"seq": before[-1]["company_seq"], "hash": before[-1]["body_hash"]}
    # every entry against the anchor file outside the database: each agrees (the seed's, written into the
    # template this database was copied from, are older than this database's anchor)
    made_here = [r for r in before if r["seq"] >= min(audit.anchor.read())]
    assert len(made_here) >= 5
    assert footer["anchor"] == {
        "listed": len(made_here),
        "before_anchor": len(before) - len(made_here),
        "problem": None,
    }
    assert footer["key"]["fingerprint"] == signing.fingerprint()
    # the verifier's head is the one the company's own verification reports (before the export's own entry)
    verified = (await client.post("/api/audit/verify")).json()
    assert verified["ok"]
    exported = (
        await AuditEntry.select()
        .where(AuditEntry.seq > before[-1]["seq"])
        .where(AuditEntry.company_id == acme)
    )
    assert [e["action"] for e in exported] == [
        "audit.exported"
    ]  # the export is on the record, after its range
    assert exported[0]["company_prev_hash"] == footer["head"]["hash"]
    assert verified["head_hash"] == exported[0]["body_hash"]  # the company's head, as the export names it
    assert _verify(tmp_path, lines, "--head", footer["head"]["hash"]).returncode == 0
    wrong = _verify(tmp_path, lines, "--head", "f" * 64)
    assert wrong.returncode == 1 and "not the expected" in wrong.stderr
    # a later, longer export still passes through this one's head; a made-up hash is not in it
    later = await _export(client)
    assert _verify(tmp_path, later, "--includes", footer["head"]["hash"]).returncode == 0
    absent = _verify(tmp_path, later, "--includes", "f" * 64)
    assert absent.returncode == 1 and "does not pass through" in absent.stderr


def _tampered(lines: list[str]) -> dict[str, tuple[list[str], str]]:
    """Each way of editing an export: (the edited lines, the line number the verifier must name)."""
    n = len(lines)  # header, entries, footer; entries are lines 2 .. n-1 (1-based)
    assert n >= 6

    def edit(i: int, change) -> list[str]:
        out = list(lines)
        value = json.loads(out[i])
        change(value)
        out[i] = json.dumps(value)
        return out

    def without(i: int) -> list[str]:
        return lines[:i] + lines[i + 1 :]

    swapped = list(lines)
    swapped[2], swapped[3] = swapped[3], swapped[2]
    anchor = lines[-1]
    rehashed = edit(n - 2, lambda v: v.update(actor="mallory@acme.example"))
    forged = json.loads(rehashed[n - 2])
    forged["hash"] = _verifier_module().body_hash(forged, n - 1)  # anyone can recompute an entry's hash …
    rehashed[n - 2] = json.dumps(forged)
    footer = json.loads(anchor)
    footer["head"]["hash"] = forged["hash"]  # … and the footer's head, but not the server's signature
    rehashed[-1] = json.dumps(footer)
    return {
        "edit a field": (edit(2, lambda v: v.update(actor="mallory@acme.example")), "line 3"),
        "edit the data": (edit(3, lambda v: v["data"].update(injected=True)), "line 4"),
        "delete a line": (without(2), "line 3"),
        "swap two lines": (swapped, "line 3"),
        "insert a line": (lines[:3] + [lines[2]] + lines[3:], "line 4"),
        "truncate the end": (lines[: n - 2], "truncated"),
        "drop the footer": (lines[:-1], "truncated"),
        "change the head": (edit(n - 1, lambda v: v["head"].update(hash="e" * 64)), f"line {n}"),
        "change the start": (edit(0, lambda v: v["start"].update(hash="e" * 64)), "line 2"),
        "rehash an entry and the head": (rehashed, f"line {n}"),
        "declare the anchor check clean": (edit(n - 1, lambda v: v["anchor"].update(listed=0)), f"line {n}"),
        "drop the signature": (edit(n - 1, lambda v: v.pop("signature")), f"line {n}"),
    }


# the verifier's refusal of an edited file, not an engine's (the export of either engine's trail: the tests around)
@pytest.mark.sqlite
async def test_every_edit_of_an_export_is_refused_naming_the_line(client, tmp_path) -> None:
    await _activity(client)
    lines = await _export(client)
    assert _verify(tmp_path, lines).returncode == 0  # positive control
    for how, (tampered, where) in _tampered(lines).items():
        result = _verify(tmp_path, tampered)
        assert result.returncode == 1, f"{how}: {result.stdout}"
        assert "REFUSED" in result.stderr and where in result.stderr, f"{how}: {result.stderr}"


# the range's link is Python over entries read back (an export of values read back on both engines: the
# first test)
@pytest.mark.sqlite
async def test_a_range_links_to_the_entry_before_it_and_verifies(client, tmp_path) -> None:
    await _activity(client)
    acme = await _company_id("Acme Analytics")
    rows = await AuditEntry.select().where(AuditEntry.company_id == acme).order_by(AuditEntry.seq)
    assert len(rows) >= 5
    first, last = rows[2], rows[-2]
    at = lambda row: row["at"].isoformat()  # noqa: E731
    lines = await _export(client, **{"from": at(first), "to": at(last)})
    assert _verify(tmp_path, lines).returncode == 0
    header, entries = json.loads(lines[0]), [json.loads(x) for x in lines[1:-1]]
    assert [e["company_seq"] for e in entries] == [r["company_seq"] for r in rows[2:-1]]
    # the entry before the range, by the company's own number and link
    assert header["start"] == {"seq": rows[1]["company_seq"], "hash": rows[1]["body_hash"]}
    # the export of what comes before ends where this range starts: consecutive exports chain
    earlier = await _export(client, to=at(rows[1]))
    assert json.loads(earlier[-1])["head"] == header["start"]
    assert _verify(tmp_path, earlier).returncode == 0
    # a range's first line no longer links to GENESIS: starting it from the beginning is refused
    cut = [json.dumps({**header, "start": {"seq": None, "hash": audit.GENESIS}}), *lines[1:]]
    refused = _verify(tmp_path, cut)
    assert refused.returncode == 1 and "line 2" in refused.stderr
    # a date as `to` includes that whole day; a range with nothing in it verifies, empty
    day = rows[-1]["at"].date().isoformat()
    assert json.loads((await _export(client, to=day))[-1])["count"] >= len(rows)
    empty = await _export(client, **{"from": "2000-01-01", "to": "2000-01-02"})
    assert json.loads(empty[-1])["count"] == 0 and _verify(tmp_path, empty).returncode == 0
    bad = await client.get("/api/audit/export", params={"from": "yesterday"})
    assert bad.status_code == 422 and "ISO 8601" in bad.text


@pytest.mark.sqlite  # who may export and the company's filter, the app's, not an engine's
async def test_a_non_admin_is_refused_and_another_company_never_appears(client) -> None:
    await _activity(client)
    acme, globex = await _company_id("Acme Analytics"), await _company_id("Globex")
    for email in ("alice@acme.example", "maria@acme.example"):
        client.cookies.clear()
        await login(client, email)
        refused = await client.get("/api/audit/export")
        assert refused.status_code == 403, email
    token = await token_for(client, "admin@acme.example")  # the assistant holding an admin's token
    assert (await client.get("/api/audit/export", headers=token)).status_code == 403
    client.cookies.clear()
    # positive control: Acme's admin gets Acme's entries, among them the awkward one
    acme_lines = await _export(client, "admin@acme.example")
    assert "test.awkward" in "\n".join(acme_lines)
    globex_lines = await _export(client, "admin@globex.example")
    globex_entries = [json.loads(x) for x in globex_lines[1:-1]]
    assert globex_entries and {e["company_id"] for e in globex_entries} == {globex}
    text = "\n".join(globex_lines)
    assert "test.awkward" not in text and "acme.example" not in text and f'"company_id":{acme}' not in text
    # a header claiming another company with Acme's lines is refused on the first of them
    header = json.loads(globex_lines[0])
    assert header["company_id"] == globex


@pytest.mark.sqlite  # the batching, the app's (an export of values read back on both engines: the first test)
async def test_the_export_streams_in_batches(client, tmp_path, monkeypatch) -> None:
    await _activity(client)
    monkeypatch.setattr(export, "BATCH", 2)  # every boundary between batches is crossed
    lines = await _export(client)
    assert len(lines) > 2 + 2 * 2
    assert _verify(tmp_path, lines).returncode == 0


async def rewrite_chain(from_seq: int, **change: Any) -> None:
    """What someone with the database's password does to rewrite history: change the entry at `from_seq`
    and recompute every hash and link after it, the company chains' and the whole trail's, so the table is
    self-consistent again. No secret is needed for any of it."""
    rows = await AuditEntry.select().order_by(AuditEntry.seq)
    links: dict[int, str] = {}
    prev = audit.GENESIS
    for row in rows:
        company = row["company_id"]
        if row["seq"] >= from_seq:
            if row["seq"] == from_seq:
                row.update(change)
            row["prev_hash"] = prev
            if company is not None and row["company_prev_hash"] is not None:
                row["company_prev_hash"] = links.get(company, audit.GENESIS)
            if row["hash_form"] == 2:
                row["body_hash"] = audit.body_hash(row)
            row["hash"] = audit.entry_hash(row)
            await AuditEntry.update(
                {
                    AuditEntry.actor: row["actor"],
                    AuditEntry.prev_hash: row["prev_hash"],
                    AuditEntry.company_prev_hash: row["company_prev_hash"],
                    AuditEntry.body_hash: row["body_hash"],
                    AuditEntry.hash: row["hash"],
                }
            ).where(AuditEntry.id == row["id"])
        prev = row["hash"]
        if company is not None:
            links[company] = audit.company_link(row)


# the verifier's checks over an export (an export of values read back on both engines: the first test)
@pytest.mark.sqlite
async def test_an_export_of_a_tampered_database_does_not_verify(client, tmp_path) -> None:
    """The export is checked against the chain and the anchor, not trusted: rows edited in the database show
    offline, and so does a rewrite of one company's chain with every hash after it recomputed, which the
    in-table chain alone accepts; the company's own verification (POST /api/audit/verify) refuses it too."""
    await _activity(client)
    acme = await _company_id("Acme Analytics")
    rows = await AuditEntry.select().where(AuditEntry.company_id == acme).order_by(AuditEntry.seq)
    await AuditEntry.update({AuditEntry.actor: "mallory@acme.example"}).where(AuditEntry.id == rows[-3]["id"])
    result = _verify(tmp_path, await _export(client))
    edited_line = len(rows) - 3 + 2
    assert result.returncode == 1 and f"line {edited_line}" in result.stderr and "edited" in result.stderr
    await AuditEntry.update({AuditEntry.actor: rows[-3]["actor"]}).where(AuditEntry.id == rows[-3]["id"])
    # positive control: restored, the company's check and the export pass
    assert (await client.post("/api/audit/verify")).json()["ok"]
    assert _verify(tmp_path, await _export(client)).returncode == 0
    # rewritten and rehashed in the database, from an entry in the middle of Acme's chain (not the head)
    await rewrite_chain(rows[-3]["seq"], actor="mallory@acme.example")
    assert (await audit._verify_chain()).ok  # the in-table chain accepts the forgery: the rewrite is whole
    verified = (await client.post("/api/audit/verify")).json()
    assert not verified["ok"] and "rewritten" in verified["reason"], verified
    assert verified["first_bad_seq"] == rows[-3]["company_seq"]  # the company's own number
    assert not (await audit.verify()).ok  # the operator's check too
    result = _verify(tmp_path, await _export(client))
    assert result.returncode == 1, result.stdout
    assert "anchor failed" in result.stderr and "rewritten" in result.stderr, result.stderr


@pytest.mark.sqlite  # the CLI's output, not an engine's (an export on both engines: the first test)
def test_the_cli_exports_a_company_and_the_whole_trail(demo_db: str, engine: str, tmp_path) -> None:
    env = dict(os.environ, DATABASE_URL=demo_db)
    cli = [sys.executable, "-m", "backend", "audit", "export"]
    out = tmp_path / "acme.jsonl"
    made = subprocess.run(
        [*cli, "--company", "Acme Analytics", "--out", str(out)], env=env, capture_output=True, text=True
    )
    assert made.returncode == 0, made.stderr
    assert oct(out.stat().st_mode & 0o777) == "0o600"
    lines = out.read_text().splitlines()
    assert json.loads(lines[0])["scope"] == "company"
    assert _verify(tmp_path, lines).returncode == 0
    whole = subprocess.run(cli, env=env, capture_output=True, text=True)  # standard output, the whole trail
    assert whole.returncode == 0, whole.stderr
    lines = whole.stdout.splitlines()
    result = _verify(tmp_path, lines)
    assert result.returncode == 0 and "the whole trail" in result.stdout, result.stderr
    # in the whole trail a removed line breaks the consecutive seqs and the prev_hash links
    refused = _verify(tmp_path, lines[:2] + lines[3:])
    assert refused.returncode == 1 and "line 3" in refused.stderr
    missing = subprocess.run([*cli, "--company", "Initech"], env=env, capture_output=True, text=True)
    assert missing.returncode == 1 and "no company" in missing.stderr
    if engine != "sqlite":
        return  # the key is a file, not an engine's: checked once
    # the key that signed them, as `cleanroom audit public-key` prints it: kept 0600 outside the database
    printed = subprocess.run(
        [sys.executable, "-m", "backend", "audit", "public-key"], env=env, capture_output=True, text=True
    )
    assert printed.returncode == 0 and printed.stdout.strip() == signing.public_text(), printed.stderr
    assert signing.fingerprint() in printed.stderr
    assert oct(signing.key_path().stat().st_mode & 0o777) == "0o600"
    key_file = tmp_path / "server.pub"
    key_file.write_text(printed.stdout)
    assert _verify(tmp_path, lines, key=str(key_file)).returncode == 0  # a file holding the key will do


def test_the_verifier_imports_the_standard_library_only() -> None:
    tree = ast.parse(VERIFIER.read_text())
    names = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    names |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert names and names <= set(sys.stdlib_module_names) | {"__future__"}, names


def _fabricated(verifier: Any, company_id: int, sign: Any, fingerprint: str) -> list[str]:
    """The review's D-M2 file, redone for format 2: a two-entry company export made up by hand (an invented
    approval and an accepted change), every hash recomputed with the public verifier's own functions, the
    footer's head, count, line digest and a clean anchor check declared, signed by `sign` (None: unsigned)
    naming `fingerprint`."""
    header = {
        "kind": "header",
        "format": 2,
        "scope": "company",
        "company_id": company_id,
        "link": "company_prev_hash",
        "values": "all",
        "from": None,
        "to": None,
        "exported_at": "2026-12-06T00:00:00+00:00",
        "start": {"seq": None, "hash": audit.GENESIS},
    }
    lines, prev = [json.dumps(header, separators=(",", ":"))], audit.GENESIS
    invented = [
        ("run.approved", "run", {"code_sha256": "ab" * 32}),
        ("action.accepted", "action_item", {"dataset": "deals", "changes": {"amount": 1}}),
    ]
    for number, (action, subject, data) in enumerate(invented, start=1):
        salt = "11" * 16
        entry = {
            "form": 2,
            "company_seq": number,
            "at": f"2026-12-0{number}T09:00:00.000000+00:00",
            "company_id": company_id,
            "actor": "admin@acme.example",
            "action": action,
            "subject_type": subject,
            "subject_id": "7",
            "data": data,
            "data_digest": verifier.contents_digest(salt, data),
            "salt": salt,
            "company_prev_hash": prev,
        }
        entry["hash"] = prev = verifier.body_hash(entry, number + 1)
        lines.append(json.dumps(entry, separators=(",", ":")))
    footer = {
        "kind": "footer",
        "count": 2,
        "head": {"seq": 2, "hash": prev},
        "anchor": {"listed": 2, "before_anchor": 0, "problem": None},
        "lines_sha256": verifier.sha256("".join(line + "\n" for line in lines).encode()),
        "key": {"algorithm": "ed25519", "fingerprint": fingerprint},
    }
    if sign is not None:
        footer["signature"] = sign(verifier.SIGNED + verifier.canonical(footer))
    return [*lines, json.dumps(footer, separators=(",", ":"))]


@pytest.mark.sqlite  # the signature's claim, not an engine's
async def test_a_fabricated_export_fails_and_the_genuine_one_passes(client, tmp_path) -> None:
    """D-M2: the file's own footer proves nothing; only the server's signature, checked against a public key
    the verifier was given, does. The key is published without signing in (GET /api/audit/public-key)."""
    import base64

    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    await _activity(client)
    acme = await _company_id("Acme Analytics")
    client.cookies.clear()
    published = (await client.get("/api/audit/public-key")).json()  # nobody signed in
    assert published["public_key"] == signing.public_text() and published["algorithm"] == "ed25519"
    assert published["fingerprint"] == signing.fingerprint()
    genuine = await _export(client)
    ok = _verify(tmp_path, genuine, key=published["public_key"])
    assert ok.returncode == 0, ok.stderr  # positive control: the genuine export, the published key
    assert published["fingerprint"] in ok.stdout

    verifier = _verifier_module()
    mallory = Ed25519PrivateKey.generate()
    mallory_public = mallory.public_key().public_bytes(
        serialization.Encoding.Raw, serialization.PublicFormat.Raw
    )
    mallory_key = base64.b64encode(mallory_public).decode()

    def mallory_signs(message: bytes) -> str:
        return base64.b64encode(mallory.sign(message)).decode()

    genuine_signature = json.loads(genuine[-1])["signature"]
    forgeries = {
        "unsigned": (_fabricated(verifier, acme, None, published["fingerprint"]), "not signed"),
        "signed by another key, naming the server's": (
            _fabricated(verifier, acme, mallory_signs, published["fingerprint"]),
            "does not verify",
        ),
        "signed by another key, naming it": (
            _fabricated(verifier, acme, mallory_signs, verifier.fingerprint(mallory_public)),
            "not the key you gave",
        ),
        "the genuine export's signature transplanted": (
            _fabricated(verifier, acme, lambda _: genuine_signature, published["fingerprint"]),
            "does not verify",
        ),
    }
    for how, (lines, why) in forgeries.items():
        result = _verify(tmp_path, lines)
        assert result.returncode == 1, f"{how}: {result.stdout}"
        assert "REFUSED" in result.stderr and why in result.stderr and "line 4" in result.stderr, (
            how,
            result.stderr,
        )
    # the forgery is otherwise a well-formed export: verified with the forger's own key it passes, so the
    # refusals above are the signature's and nothing else's …
    own = _verify(tmp_path, forgeries["signed by another key, naming it"][0], key=mallory_key)
    assert own.returncode == 0, own.stderr
    # … and the genuine export checked with a key other than the server's fails
    wrong = _verify(tmp_path, genuine, key=mallory_key)
    assert wrong.returncode == 1 and "not the key you gave" in wrong.stderr
    # no key at all: the verifier does not run
    alone = tmp_path / "alone"
    missing = subprocess.run(
        [sys.executable, "-I", "-S", VERIFIER.name, "export.jsonl"], cwd=alone, capture_output=True, text=True
    )
    assert missing.returncode == 2 and "--public-key" in missing.stderr


def test_the_verifiers_ed25519_agrees_with_cryptography_and_rfc_8032() -> None:
    """The stdlib verifier's Ed25519 check (RFC 8032's reference code) accepts what `cryptography` signs and
    RFC 8032's test vector, and refuses a changed message, a changed signature, another key, and a signature
    whose S is not reduced (s + L: the malleability RFC 8032 forbids)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    verifier = _verifier_module()
    # RFC 8032, 7.1, TEST 2 (one-byte message 0x72)
    public = bytes.fromhex("3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c")
    signature = bytes.fromhex(
        "92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da"
        "085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00"
    )
    assert verifier.ed25519_verify(public, b"\x72", signature)
    assert not verifier.ed25519_verify(public, b"\x73", signature)
    key = Ed25519PrivateKey.generate()
    raw = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    other = (
        Ed25519PrivateKey.generate()
        .public_key()
        .public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    )
    for message in (b"", b"footer", os.urandom(300)):
        signed = key.sign(message)
        assert verifier.ed25519_verify(raw, message, signed)
        assert not verifier.ed25519_verify(raw, message + b"!", signed)
        assert not verifier.ed25519_verify(other, message, signed)
        flipped = bytes([signed[0] ^ 1]) + signed[1:]
        assert not verifier.ed25519_verify(raw, message, flipped)
        s = int.from_bytes(signed[32:], "little") + verifier._Q  # the same point, S not reduced
        assert not verifier.ed25519_verify(raw, message, signed[:32] + s.to_bytes(32, "little"))
