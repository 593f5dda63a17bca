"""People told when they are needed (issue 56 item 5), against a real SMTP server (aiosmtpd) and a real HTTP
receiver the tests start: who is told of a run waiting for approval, what a message may carry, signatures a
receiver checks with the documented recipe, retries, and the hostile side (another person's preferences,
another company's endpoints, internal addresses, a deactivated person, a dead mail server), each next to its
positive control."""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta
from typing import Any

import pytest

from backend import clock
from backend.notify import delivery
from backend.notify.tables import Notification, WebhookEndpoint
from backend.records.tables import Deal
from backend.runs.tables import Run
from backend.settings import get_settings
from backend.tenancy.tables import User
from tests.support.flows import flow_body, step
from tests.support.http import login, token_for
from tests.support.runs import enable_code, proposal
from tests.support.servers import free_port

pytestmark = pytest.mark.sqlite  # no claim here is PostgreSQL's

ADMIN, ALICE, BOB = "admin@acme.example", "alice@acme.example", "bob@acme.example"
GLOBEX_ADMIN = "admin@globex.example"
PLANTED_VALUE = "Zanzibar-Quokka-Merger-7731"  # a record value alice's run stages
PLANTED_CODE = "PLANTED_CODE_MARKER_5521"  # a line of the run's code


async def uid(email: str) -> int:
    return (await User.select(User.id).where(User.email == email).first())["id"]


async def as_(client: Any, email: str) -> None:
    client.cookies.clear()
    await login(client, email)


async def add_webhook(client: Any, url: str, events: list[str] | None = None) -> dict[str, Any]:
    await as_(client, ADMIN)
    r = await client.post("/api/company/webhooks", json={"url": url, "events": events or []})
    assert r.status_code == 201, r.text
    return r.json()


async def propose_as_alice(client: Any, **extra: Any) -> tuple[dict[str, Any], float]:
    token = await token_for(client, ALICE)
    code = (
        f"# {PLANTED_CODE}\nimport pandas as pd\nprint(pd.read_csv('/work/input/datasets/deals.csv').shape)\n"
    )
    started = time.monotonic()
    r = await client.post(
        "/api/runs", json=proposal(code, title=f"Deals like {PLANTED_VALUE}", **extra), headers=token
    )
    assert r.status_code == 201, r.text
    return r.json(), started


async def test_an_approval_request_reaches_its_approvers_by_mail_and_webhook_signed_and_bare(
    client, inbox, receiver, verify
) -> None:
    await enable_code()
    alice = await uid(ALICE)
    await Deal.update({Deal.name: PLANTED_VALUE}).where(
        Deal.id == (await Deal.select(Deal.id).where(Deal.owner == alice).first())["id"]
    )
    hook = await add_webhook(client, receiver.url)
    run, started = await propose_as_alice(client)
    mails = await asyncio.to_thread(inbox.take, 2)
    latency = max(m.arrived for m in mails) - started
    print(f"approval request in both approvers' inboxes {latency * 1000:.0f} ms after the proposal was sent")
    # who may approve it (its requester and the company's admin) and nobody else: bob, a member, is not told
    assert sorted(to for m in mails for to in m.to) == [ADMIN, ALICE]
    link = f"{get_settings().effective_console_url}/runs/{run['id']}"
    for mail in mails:
        assert link in mail.text and f"Run #{run['id']} waits for your approval" in mail.subject
    (request,) = await asyncio.to_thread(receiver.take, 1)
    body = request.json()
    assert body["event"] == "run.awaiting_approval" and body["subject"] == {"type": "run", "id": run["id"]}
    assert body["url"] == link and request.headers["X-Cleanroom-Delivery"] == str(body["id"])
    # the documented recipe accepts the real request once, and refuses it replayed, forged, or stale
    seen: set[str] = set()
    assert verify(hook["secret"], request.headers, request.body, seen)
    assert not verify(hook["secret"], request.headers, request.body, seen)  # the same delivery again
    forged_body = request.body.replace(b'"run.awaiting_approval"', b'"run.finished"')
    assert not verify(hook["secret"], request.headers, forged_body, set())
    assert not verify("whsec_" + "A" * 43, request.headers, request.body, set())  # another secret
    stamp = int(request.headers["X-Cleanroom-Timestamp"])
    assert not verify(hook["secret"], request.headers, request.body, set(), now=stamp + 301)
    assert verify(hook["secret"], request.headers, request.body, set(), now=stamp + 299)  # control
    # nothing in any message that the run's data or code holds (the API's own answer does: the control)
    assert (
        PLANTED_CODE
        in (await client.get(f"/api/runs/{run['id']}", headers=await token_for(client, ALICE))).text
    )
    for text in [m.text + m.subject for m in mails] + [request.body.decode()]:
        assert PLANTED_VALUE not in text and PLANTED_CODE not in text and "pandas" not in text
    assert inbox.mails.empty() and receiver.requests.empty()


async def test_a_dead_mail_server_leaves_the_proposal_intact_and_the_mail_is_retried(client, inbox) -> None:
    await enable_code()
    live = get_settings().smtp_port
    dead = free_port()  # nothing listens there
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("CLEANROOM_SMTP_PORT", str(dead))
        get_settings.cache_clear()
        run, _ = await propose_as_alice(client)
        assert run["status"] == "awaiting_approval"
        rows = await _settled_rows(run["id"], "pending")
    get_settings.cache_clear()
    assert live == get_settings().smtp_port
    assert {r["attempts"] for r in rows} == {1} and all("SMTP" in r["last_error"] for r in rows)
    assert (await Run.select(Run.status).where(Run.id == run["id"]).first())["status"] == "awaiting_approval"
    # not before its backoff; then sent, to the same two people
    assert await delivery.deliver_due() == 0 and inbox.mails.empty()
    later = clock.now() + timedelta(seconds=get_settings().notify_retry_base_seconds + 1)
    assert await delivery.deliver_due(later) == 2
    assert sorted(to for m in await asyncio.to_thread(inbox.take, 2) for to in m.to) == [ADMIN, ALICE]


async def _settled_rows(
    run_id: int, status: str, channel: str = "email", timeout: float = 10.0
) -> list[dict[str, Any]]:
    """The outbox rows of a run's approval request on `channel` once their first attempt ended in `status`."""
    deadline = time.monotonic() + timeout
    while True:
        rows = await Notification.select().where(
            (Notification.event == "run.awaiting_approval")
            & (Notification.channel == channel)
            & Notification.body.like(f"%/runs/{run_id}%")
        )
        if rows and all(r["status"] == status and r["attempts"] >= 1 for r in rows):
            return rows
        assert time.monotonic() < deadline, rows
        await asyncio.sleep(0.05)


async def test_a_receiver_that_fails_gets_the_same_delivery_again_later(client, inbox, receiver) -> None:
    await enable_code()
    receiver.answers = [500]
    await add_webhook(client, receiver.url, ["run.awaiting_approval"])
    run, _ = await propose_as_alice(client)
    first = (await asyncio.to_thread(receiver.take, 1))[0]
    await asyncio.to_thread(inbox.take, 2)
    (row,) = await _settled_rows(run["id"], "pending", "webhook")
    assert row["attempts"] == 1 and "500" in row["last_error"]
    later = clock.now() + timedelta(seconds=get_settings().notify_retry_base_seconds + 1)
    assert await delivery.deliver_due(later) == 1
    again = (await asyncio.to_thread(receiver.take, 1))[0]
    assert again.json()["id"] == first.json()["id"] == row["id"]  # the receiver can drop the repeat
    assert (await Notification.select(Notification.status).where(Notification.id == row["id"]).first())[
        "status"
    ] == "sent"


async def test_a_person_deactivated_before_the_mail_went_out_is_not_mailed(client, inbox) -> None:
    await enable_code()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("CLEANROOM_SMTP_PORT", str(free_port()))  # the first attempt fails: the mails wait
        get_settings.cache_clear()
        run, _ = await propose_as_alice(client)
        await _settled_rows(run["id"], "pending")
    get_settings.cache_clear()
    await as_(client, ADMIN)
    assert (await client.post(f"/api/company/people/{await uid(ALICE)}/deactivate")).status_code == 200
    later = clock.now() + timedelta(seconds=get_settings().notify_retry_base_seconds + 1)
    assert await delivery.deliver_due(later) == 1
    (mail,) = await asyncio.to_thread(inbox.take, 1)
    assert mail.to == [ADMIN]  # the control: the admin, who still may approve it, is told
    dropped = await Notification.select().where(Notification.address == ALICE)
    assert [r["status"] for r in dropped] == ["dropped"]
    assert inbox.mails.empty()


async def test_preferences_are_each_persons_own_and_a_muted_event_sends_no_mail(client, inbox) -> None:
    await enable_code()
    await as_(client, ALICE)
    r = await client.put("/api/me/notifications", json={"muted": ["run.awaiting_approval"]})
    assert r.status_code == 200 and r.json()["muted"] == ["run.awaiting_approval"]
    assert (await client.put("/api/me/notifications", json={"muted": ["no.such"]})).status_code == 422
    # bob reads and changes only his own: alice's choice is not his, and naming her changes nothing of hers
    await as_(client, BOB)
    assert (await client.get("/api/me/notifications")).json()["muted"] == []
    r = await client.put("/api/me/notifications", json={"email_enabled": False, "user_id": await uid(ALICE)})
    assert r.status_code == 200 and r.json()["email_enabled"] is False  # his own (the control)
    await as_(client, ALICE)
    mine = (await client.get("/api/me/notifications")).json()
    assert mine["email_enabled"] is True and mine["muted"] == ["run.awaiting_approval"]
    # an assistant token may not change what its person is told of
    token = await token_for(client, ALICE)
    r = await client.put("/api/me/notifications", json={"muted": []}, headers=token)
    assert r.status_code == 403
    # the muted event: alice gets nothing, the admin (control) does
    await propose_as_alice(client)
    (mail,) = await asyncio.to_thread(inbox.take, 1)
    assert mail.to == [ADMIN]
    await asyncio.sleep(0)
    assert not await Notification.exists().where(Notification.address == ALICE)


async def test_webhooks_are_an_admins_of_their_own_company_and_the_secret_is_shown_once(
    client, inbox
) -> None:
    url = "http://127.0.0.1:9/hook"
    hook = await add_webhook(client, url)
    assert hook["secret"].startswith("whsec_")
    stored = await WebhookEndpoint.select().where(WebhookEndpoint.id == hook["id"]).first()
    assert hook["secret"] not in str(stored)  # sealed at rest
    listed = (await client.get("/api/company/webhooks")).json()
    assert [h["id"] for h in listed] == [hook["id"]] and "secret" not in listed[0]
    # another company's admin: not listed, not removable (404 as a missing one), and one they add is theirs
    # whatever company the body names
    await as_(client, GLOBEX_ADMIN)
    assert (await client.get("/api/company/webhooks")).json() == []
    assert (await client.delete(f"/api/company/webhooks/{hook['id']}")).status_code == 404
    acme = stored["company"]
    r = await client.post("/api/company/webhooks", json={"url": url, "company_id": acme, "company": acme})
    assert r.status_code == 201
    theirs = (
        await WebhookEndpoint.select(WebhookEndpoint.company)
        .where(WebhookEndpoint.id == r.json()["id"])
        .first()
    )
    assert theirs["company"] != acme
    assert (
        await WebhookEndpoint.select(WebhookEndpoint.active).where(WebhookEndpoint.id == hook["id"]).first()
    )["active"]
    # a member and an assistant token may not add one
    await as_(client, BOB)
    assert (await client.post("/api/company/webhooks", json={"url": url})).status_code == 403
    token = await token_for(client, ADMIN)
    assert (await client.post("/api/company/webhooks", json={"url": url}, headers=token)).status_code == 403
    # the control: its own admin removes it
    await as_(client, ADMIN)
    assert [h["id"] for h in (await client.get("/api/company/webhooks")).json()] == [hook["id"]]
    assert (await client.delete(f"/api/company/webhooks/{hook['id']}")).status_code == 204
    assert (await client.get("/api/company/webhooks")).json() == []


async def test_an_internal_address_is_refused_unless_the_operator_allows_it(client, monkeypatch) -> None:
    monkeypatch.setenv("CLEANROOM_WEBHOOK_ALLOW_PRIVATE", "false")
    get_settings.cache_clear()
    await as_(client, ADMIN)
    for url in (
        "http://127.0.0.1:8080/x",
        "http://10.1.2.3/x",
        "http://[::1]/x",
        "http://169.254.169.254/x",
        "http://localhost/x",
        "http://[::ffff:192.168.1.1]/x",
    ):
        r = await client.post("/api/company/webhooks", json={"url": url})
        assert r.status_code == 422 and r.json()["error"] == "webhook_address_refused", (url, r.text)
    for url in ("ftp://example.com/x", "http://user:pw@example.com/x", "not a url"):
        assert (await client.post("/api/company/webhooks", json={"url": url})).status_code == 422
    assert not await WebhookEndpoint.exists()
    # an endpoint made while the operator allowed it is not reached once they no longer do
    monkeypatch.setenv("CLEANROOM_WEBHOOK_ALLOW_PRIVATE", "true")
    get_settings.cache_clear()
    hook = await add_webhook(client, "http://127.0.0.1:9/hook")  # the control: allowed, it is made
    monkeypatch.setenv("CLEANROOM_WEBHOOK_ALLOW_PRIVATE", "false")
    get_settings.cache_clear()
    row = Notification(
        company=(await WebhookEndpoint.select(WebhookEndpoint.company).first())["company"],
        event="run.finished",
        channel="webhook",
        endpoint=hook["id"],
        body="{}",
        status="pending",
        next_attempt_at=clock.now(),
        created_at=clock.now(),
    )
    await row.save()
    await delivery.deliver_due()
    after = await Notification.select().where(Notification.id == row.id).first()
    assert after["status"] == "dropped" and "loopback" in after["last_error"]
    get_settings.cache_clear()


async def test_every_other_event_reaches_whom_it_concerns_and_says_no_more(
    client, inbox, receiver, monkeypatch
) -> None:
    """Each event at the lowest level that makes it (the run's end, the changes' count, the schedule's pause,
    a charge, the reaper), its mail to the right people, its webhook, and nothing of the run in either."""
    from backend.actions import service as actions
    from backend.credits import service as credits
    from backend.execution.execute import finish, tell_changes
    from backend.fleet import service as fleet
    from backend.fleet.tables import WorkerHost
    from backend.runs.rows import whole_run
    from backend.schedules.service import _pause
    from backend.tenancy.context import load_user_context

    monkeypatch.setenv("CLEANROOM_NOTIFY_OPERATOR_EMAILS", '["ops@example.net"]')
    get_settings.cache_clear()
    await enable_code()
    await add_webhook(client, receiver.url)
    one, _ = await propose_as_alice(client)
    two, _ = await propose_as_alice(client, conversation_id="conv-2")
    await asyncio.to_thread(inbox.take, 4)  # the two approval requests
    await asyncio.to_thread(receiver.take, 2)
    alice = await uid(ALICE)
    acme = (await Run.select(Run.company).where(Run.id == one["id"]).first())["company"]

    async def told(mails: int, hooks: int) -> tuple[list[Any], list[dict[str, Any]]]:
        got = await asyncio.to_thread(inbox.take, mails)
        posted = [r.json() for r in await asyncio.to_thread(receiver.take, hooks)]
        for text in [m.text + m.subject for m in got] + [str(p) for p in posted]:
            assert PLANTED_VALUE not in text and PLANTED_CODE not in text
        return got, posted

    # a run of alice's finished, another failed: alice alone is told by mail; the webhook hears both
    await finish(one["id"], "succeeded")
    await finish(two["id"], "timed_out")
    mails, posted = await told(2, 2)
    assert sorted((m.to[0], m.subject) for m in mails) == [
        (ALICE, f"[Cleanroom] Your run #{one['id']} finished"),
        (ALICE, f"[Cleanroom] Your run #{two['id']} ended timed out"),
    ]
    assert sorted(p["event"] for p in posted) == ["run.failed", "run.finished"]
    # its proposed changes wait: whoever may decide them (alice, the admin) is told, with their number only
    # (one valid change and one invalid: the count is of those that wait, as ingest counts them)
    deal = await Deal.select(Deal.id).where(Deal.owner == alice).first()
    entries = [
        {"op": "update", "dataset": "deals", "record_id": deal["id"], "changes": {"name": PLANTED_VALUE}},
        {"op": "update", "dataset": "widgets", "record_id": 1, "changes": {"x": 1}},
    ]
    counts: dict[str, int] = {}
    row = await whole_run(one["id"])
    assert await actions.ingest(row, entries, await load_user_context(alice), counts) == 2
    assert counts == {"pending": 1}
    await tell_changes(row, counts["pending"])
    mails, (posted,) = await told(2, 1)
    assert sorted(m.to[0] for m in mails) == [ADMIN, ALICE] and "1 change(s)" in mails[0].subject
    assert posted["event"] == "changes.awaiting_decision" and posted["count"] == 1
    # a schedule could not fire: its owner is told it is paused, not why (the reason is on its page)
    await _pause(
        {"id": 77, "company": acme, "owner": alice, "origin_run": one["id"], "origin_flow": None},
        f"the owner may no longer read {PLANTED_VALUE}",
    )
    (mail,), (posted,) = await told(1, 1)
    assert mail.to == [ALICE] and "Schedule #77" in mail.subject and posted["event"] == "schedule.failed"
    # a flow waits for approval: the same people as a run's, with the flow's page; nothing of its steps' code
    token = await token_for(client, ALICE)
    flow = await client.post(
        "/api/flows", json=flow_body(step(f"# {PLANTED_CODE}\nprint(1)", title=PLANTED_VALUE)), headers=token
    )
    assert flow.status_code == 201, flow.text
    mails, (posted,) = await told(2, 1)
    assert sorted(m.to[0] for m in mails) == [ADMIN, ALICE]
    assert f"/flows/{flow.json()['id']}" in mails[0].text and posted["event"] == "flow.awaiting_approval"
    # the pool (the notifier's watcher, not the charge): crossing 80 % tells the admins once, a pass with
    # nothing new tells nobody, 100 % tells them again
    pool, _ = await credits._pool_and_used(acme)

    async def charge_to(percent: float, run_id: int) -> None:
        _, now = await credits._pool_and_used(acme)
        seconds = (pool * percent / 100 - now - 1) / 0.06  # base 1 + 2 vCPU × 0.02 + 2 GiB × 0.01 per second
        await credits.charge(
            company_id=acme,
            user_id=alice,
            run_id=run_id,
            run_title="x",
            vcpus=2,
            memory_mib=2048,
            seconds=seconds,
            actor="test",
        )

    assert await credits.tell_pools() == []  # the control: below 80 % nobody is told
    await charge_to(85, one["id"])
    assert await credits.tell_pools() == [(acme, 80)]
    (mail,), (posted,) = await told(1, 1)
    assert mail.to == [ADMIN] and "80 % used" in mail.subject and posted["event"] == "credits.pool_80"
    await charge_to(95, two["id"])
    assert await credits.tell_pools() == []  # told of 80 % already this period
    three, _ = await propose_as_alice(client, conversation_id="conv-3")
    await asyncio.to_thread(inbox.take, 2)
    await asyncio.to_thread(receiver.take, 1)
    await charge_to(101, three["id"])
    assert await credits.tell_pools() == [(acme, 100)]
    (mail,), (posted,) = await told(1, 1)
    assert mail.to == [ADMIN] and "used up" in mail.subject and posted["event"] == "credits.pool_100"
    # a host was lost holding alice's run: Acme's admin is told of that run, the operator of the host
    old = clock.now() - timedelta(hours=1)
    await WorkerHost.insert(WorkerHost(host_id="hv-7", started_at=old, last_heartbeat=old))
    await Run.update({Run.status: "running", Run.host_id: "hv-7", Run.vm_started_at: old}).where(
        Run.id == three["id"]
    )
    assert await fleet.reap() == ["hv-7"]
    mails, posted = await told(3, 2)  # the operator's, the admin's, and alice's run failing
    by_person = {m.to[0]: m for m in mails}
    assert "hv-7" in by_person["ops@example.net"].text and "hv-7" not in by_person[ADMIN].text
    assert f"#{three['id']}" in by_person[ADMIN].text and "worker host was lost" in by_person[ADMIN].subject
    assert sorted(p["event"] for p in posted) == ["run.failed", "worker.lost"]
    assert inbox.mails.empty() and receiver.requests.empty()
    get_settings.cache_clear()


async def test_the_notifier_loop_sends_what_is_due_and_runs_its_watchers(demo_db, inbox, monkeypatch) -> None:
    """What no action kicks (a retry that came due, a row a stopped process left) the loop sends; and each
    pass runs its watchers (the credit pools')."""
    monkeypatch.setenv("CLEANROOM_NOTIFY_POLL_SECONDS", "0.05")
    get_settings.cache_clear()
    admin = await User.select(User.id, User.company).where(User.email == ADMIN).first()
    row = Notification(
        company=admin["company"],
        event="run.finished",
        channel="email",
        user=admin["id"],
        address=ADMIN,
        subject="[Cleanroom] due",
        body="due\n",
        status="pending",
        next_attempt_at=clock.now(),
        created_at=clock.now(),
    )
    await row.save()
    passes: list[int] = []

    async def watcher() -> None:
        passes.append(1)

    notifier = delivery.Notifier()
    notifier.start(watchers=[watcher])
    try:
        (mail,) = await asyncio.to_thread(inbox.take, 1)
        deadline = time.monotonic() + 10
        while not passes and time.monotonic() < deadline:  # the pass that sent it runs its watchers next
            await asyncio.sleep(0.01)
    finally:
        await notifier.stop()
    assert mail.to == [ADMIN] and mail.subject == "[Cleanroom] due" and passes
    assert (await Notification.select(Notification.status).where(Notification.id == row.id).first())[
        "status"
    ] == "sent"
    get_settings.cache_clear()
