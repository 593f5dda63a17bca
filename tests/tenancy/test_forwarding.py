"""The forwarded-address secret and the proxy in front (D-L10, D-M4's proxy part): a short secret is refused
at start, a console whose secret is not the API's finds out at start and stops, and a proxy that
FORWARDED_ALLOW_IPS does not name is reported. Each hostile case beside its control."""

from __future__ import annotations

import logging

import httpx
import pytest
import typer

from backend.settings import Settings, get_settings
from backend.tenancy import forwarded
from console import forwarding
from tests.support.console import console_api

pytestmark = pytest.mark.sqlite

GOOD_SECRET = "k" * forwarded.MIN_SECRET_BYTES


# --- at least 32 bytes -------------------------------------------------------------------------------------


def test_a_short_configured_secret_is_refused_at_start(monkeypatch, tmp_path) -> None:
    from backend.cli.serve import _forwarding_checks

    monkeypatch.setattr(get_settings(), "console_forward_secret", "correct horse battery staple")  # 28 bytes
    with pytest.raises(forwarded.ForwardSecretError, match="28 bytes.*at least 32"):
        forwarded.secret()
    with pytest.raises(typer.Exit):  # `cleanroom serve` starts nothing
        _forwarding_checks(get_settings())
    # control: 32 bytes is enough, and is the key that signs
    monkeypatch.setattr(get_settings(), "console_forward_secret", GOOD_SECRET)
    assert forwarded.secret() == GOOD_SECRET.encode()
    _forwarding_checks(get_settings())


def test_a_short_secret_file_is_refused_too(monkeypatch, tmp_path) -> None:
    monkeypatch.setattr(get_settings(), "console_forward_secret", None)
    monkeypatch.setattr(get_settings(), "data_dir", tmp_path)
    (tmp_path / forwarded.SECRET_FILE).write_text("short\n")
    with pytest.raises(forwarded.ForwardSecretError, match=forwarded.SECRET_FILE):
        forwarded.secret()
    # control: a fresh data directory gets a file of its own, long enough
    monkeypatch.setattr(get_settings(), "data_dir", tmp_path / "fresh")
    (tmp_path / "fresh").mkdir()
    assert len(forwarded.secret()) >= forwarded.MIN_SECRET_BYTES


# --- the console and the API check at start that they share the key -----------------------------------------


async def test_a_console_with_another_secret_is_detected_and_stops(demo_db: str) -> None:
    """A console on another host with its own key: the API would ignore every address it signs. The probe
    at start says so and the console stops; with the API's key (control) it carries on."""
    stopped: list[bool] = []
    async with console_api(demo_db) as config:
        other = b"another machine's own secret, 32+ bytes long"
        assert await forwarding.shares_key(config, key=other) is False
        assert await forwarding.check(config, lambda: stopped.append(True), key=other) is False
        assert stopped == [True]
        # control: the same key
        assert await forwarding.shares_key(config) is True
        assert await forwarding.check(config, lambda: stopped.append(True)) is True
        assert stopped == [True]


async def test_the_probe_believes_only_a_probe_signed_with_the_key(demo_db: str) -> None:
    """Nobody learns anything from the probe: a sign-in's signature, a replayed probe, or no signature at all
    answer `signed: false` (control: a fresh probe from the console's key answers true)."""
    async with console_api(demo_db) as config:
        http = config.http()

        async def signed(headers: dict[str, str]) -> bool:
            response = await http.get("/api/auth/forwarding", headers=headers)
            assert response.status_code == 200
            return response.json()["signed"]

        probe = forwarded.probe_headers()
        assert await signed(probe) is True
        assert await signed(probe) is False  # the same one again: a replay
        assert await signed(forwarded.headers(forwarded.PROBE_ADDRESS, "")) is False  # a sign-in's
        assert await signed({}) is False


async def test_a_console_that_cannot_reach_the_api_yet_keeps_asking(demo_db: str, monkeypatch) -> None:
    """Under `cleanroom serve` the console starts before the API listens: unanswered probes are retried,
    then the answer counts (no refusal for a slow API)."""
    sleeps: list[float] = []

    async def no_sleep(seconds: float) -> None:
        sleeps.append(seconds)

    monkeypatch.setattr(forwarding.asyncio, "sleep", no_sleep)
    async with console_api(demo_db) as config:
        asgi = config.transport
        calls = 0

        class NotYet(httpx.AsyncBaseTransport):
            async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
                nonlocal calls
                calls += 1
                if calls <= 3:
                    raise httpx.ConnectError("connection refused", request=request)
                return await asgi.handle_async_request(request)

        config.transport = NotYet()
        assert await forwarding.check(config, lambda: pytest.fail("refused a slow API")) is True
        await config.aclose()
    assert sleeps == [1.0, 2.0, 4.0]


# --- a proxy that FORWARDED_ALLOW_IPS does not name ----------------------------------------------------------


def _settings(**values) -> Settings:
    return get_settings().model_copy(update=values)


def test_start_warns_of_a_proxy_forwarded_allow_ips_does_not_name() -> None:
    behind = _settings(
        host="127.0.0.1", public_url="https://cleanroom.example", console_url="https://c.example"
    )
    for which in ("api", "console"):
        warning = forwarded.unnamed_proxy(which, behind, {})
        assert warning and "FORWARDED_ALLOW_IPS=127.0.0.1" in warning
        assert forwarded.unnamed_proxy(
            which, behind, {"FORWARDED_ALLOW_IPS": "10.0.0.5"}
        )  # not the local one
        # control: naming the proxy on this machine silences it
        assert forwarded.unnamed_proxy(which, behind, {"FORWARDED_ALLOW_IPS": "127.0.0.1"}) is None
    # listening on loopback while people use a name: a local proxy, even over http
    assert forwarded.unnamed_proxy("api", _settings(host="127.0.0.1", public_url="http://cr.internal"), {})
    # listening on every address behind a TLS proxy: any naming will do (its address is not known here)
    exposed = _settings(host="0.0.0.0", public_url="https://cleanroom.example")
    assert forwarded.unnamed_proxy("api", exposed, {})
    assert forwarded.unnamed_proxy("api", exposed, {"FORWARDED_ALLOW_IPS": "10.0.0.0/8"}) is None
    # controls: the embedded default and a direct http deployment need no proxy
    assert forwarded.unnamed_proxy("api", _settings(public_url=None, api_base_url=None), {}) is None
    assert (
        forwarded.unnamed_proxy("api", _settings(host="0.0.0.0", public_url="http://10.1.2.3:8400"), {})
        is None
    )


def test_a_sign_in_through_an_unnamed_proxy_is_noticed() -> None:
    via = {"x-forwarded-for": "203.0.113.9"}
    assert forwarded.proxy_unnamed("127.0.0.1", via, {})
    assert forwarded.proxy_unnamed("10.0.0.5", via, {"FORWARDED_ALLOW_IPS": "127.0.0.1"})
    # controls: the proxy named; a header claimed by a public address (no proxy of ours); a named proxy's
    # header believed (the peer is then the browser's own address); no forwarding header at all
    assert not forwarded.proxy_unnamed("10.0.0.5", via, {"FORWARDED_ALLOW_IPS": "10.0.0.0/8"})
    assert not forwarded.proxy_unnamed("198.51.100.4", via, {})
    assert not forwarded.proxy_unnamed(
        "10.9.9.9", {"x-forwarded-for": "10.9.9.9"}, {"FORWARDED_ALLOW_IPS": "*"}
    )
    assert not forwarded.proxy_unnamed("127.0.0.1", {}, {})


async def test_the_api_logs_a_sign_in_through_an_unnamed_proxy(demo_db: str, monkeypatch, caplog) -> None:
    monkeypatch.delenv("FORWARDED_ALLOW_IPS", raising=False)
    monkeypatch.setattr(forwarded, "_warned", set())
    async with console_api(demo_db) as config:  # reaches the API from 127.0.0.1
        body = {"email": "alice@acme.example", "password": "demo"}
        with caplog.at_level(logging.WARNING, logger="cleanroom.forwarded"):
            plain = await config.http().post("/api/auth/login", json=body, headers={"origin": config.origin})
            assert plain.status_code == 200 and not caplog.records  # control: no proxy, no warning
            headers = {"origin": config.origin, "x-forwarded-for": "203.0.113.9"}
            proxied = await config.http().post("/api/auth/login", json=body, headers=headers)
            assert proxied.status_code == 200
    assert ["FORWARDED_ALLOW_IPS does not name" in r.getMessage() for r in caplog.records] == [True]
