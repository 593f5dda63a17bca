"""A webhook is delivered to the address that was checked, not to whatever its name resolves to a moment later.

The hostile party is a company admin who owns the DNS of the endpoint's name: it answers a public address when
the delivery checks it and 127.0.0.1 (the operator's own network) when asked again. The delivery resolves once
and connects to the checked address, the name kept in Host and, for https, in SNI, so the receiver's
certificate is still checked against the name."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import httpx
import pytest

from backend.errors import Invalid
from backend.notify import delivery, webhooks
from backend.notify.tables import WebhookEndpoint
from backend.records.sync import seal
from backend.settings import get_settings
from backend.tenancy.tables import Company

PUBLIC = "93.184.216.34"


def _rebinding(monkeypatch: pytest.MonkeyPatch, answers: list[str]) -> list[str]:
    """The running loop's resolver answers `answers` in turn (the last one for ever after); returns the log."""
    asked: list[str] = []

    async def getaddrinfo(self: Any, host: str, port: int, **_: Any) -> list[tuple]:
        asked.append(host)
        address = answers[min(len(asked), len(answers)) - 1]
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, port))]

    monkeypatch.setattr(asyncio.BaseEventLoop, "getaddrinfo", getaddrinfo)
    return asked


async def test_the_delivery_connects_to_the_checked_address_with_the_name_kept(monkeypatch) -> None:
    asked = _rebinding(monkeypatch, [PUBLIC, "127.0.0.1"])  # public when checked, loopback after
    destination = await webhooks.check_destination("https://hooks.example:8443/in?x=1")
    assert asked == ["hooks.example"]  # one resolution
    assert destination.url == f"https://{PUBLIC}:8443/in?x=1"
    assert destination.headers == {"Host": "hooks.example:8443"}
    assert destination.extensions == {"sni_hostname": "hooks.example"}  # the certificate checked for the name

    sent: list[httpx.Request] = []

    def receiver(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(204)

    async with httpx.AsyncClient(transport=httpx.MockTransport(receiver)) as client:
        await client.post(destination.url, headers=destination.headers, extensions=destination.extensions)
    (request,) = sent
    assert request.url.host == PUBLIC and request.headers["host"] == "hooks.example:8443"
    assert request.extensions["sni_hostname"] == "hooks.example"


async def test_control_a_name_that_answers_loopback_when_checked_is_refused(monkeypatch) -> None:
    _rebinding(monkeypatch, ["127.0.0.1"])
    with pytest.raises(Invalid, match="loopback, private or reserved"):
        await webhooks.check_destination("http://hooks.example/in")


def test_an_ipv6_address_is_written_as_a_literal() -> None:
    destination = webhooks.pinned("http://hooks.example/in", "2606:2800:220:1::1")
    assert destination.url == "http://[2606:2800:220:1::1]/in" and destination.headers == {
        "Host": "hooks.example"
    }
    assert destination.extensions == {}  # plain http: no SNI


@pytest.mark.sqlite
async def test_the_outbox_delivers_to_the_checked_address(demo_db, monkeypatch) -> None:
    """The delivery itself (not only the check): the receiver it reaches is the checked address, though the name
    resolves to loopback by the time it connects. Its control: the endpoint's own URL names the host."""
    monkeypatch.setenv("CLEANROOM_WEBHOOK_ALLOW_PRIVATE", "false")
    get_settings.cache_clear()
    asked = _rebinding(monkeypatch, [PUBLIC, "127.0.0.1"])
    sent: list[httpx.Request] = []
    real = httpx.AsyncClient

    def client(**kwargs: Any) -> httpx.AsyncClient:  # the delivery's client, its network a recorder
        return real(**kwargs, transport=httpx.MockTransport(lambda r: sent.append(r) or httpx.Response(204)))

    monkeypatch.setattr(delivery.httpx, "AsyncClient", client)
    company = (await Company.select(Company.id).first())["id"]
    url = "https://hooks.example/in"
    endpoint = await WebhookEndpoint.insert(
        WebhookEndpoint(company=company, url=url, events=[], secret_sealed=seal("whsec_test"), active=True)
    ).returning(WebhookEndpoint.id)
    row = {"id": 1, "company": company, "endpoint": endpoint[0]["id"], "event": "run.finished", "body": "{}"}
    try:
        await delivery._send_webhook(row)
    finally:
        get_settings.cache_clear()
    (request,) = sent
    assert asked == ["hooks.example"]
    assert request.url.host == PUBLIC and request.headers["host"] == "hooks.example"
    assert request.extensions["sni_hostname"] == "hooks.example"
