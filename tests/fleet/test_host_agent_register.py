"""A fleet host outlives a moment of trouble: its registration (leftovers, warm states, the API) is tried
again with backoff instead of ending the host, and its heartbeat task survives any one failure. Before, a
libvirtd restart during the warm-state boot ended the host, and the API away past the retries after a
heartbeat's 409 ended the heartbeat task while the host went on taking jobs."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from backend.fleet import host_agent
from backend.fleet.host_agent import ApiUnavailable, HostAgent
from backend.fleet.schemas import HostBody
from backend.settings import get_settings


def _host(handler=None) -> HostAgent:
    http = None
    if handler is not None:
        http = httpx.AsyncClient(transport=httpx.MockTransport(handler), base_url="http://api.invalid")
    return HostAgent(host_id="alpha", api_url="http://api.invalid", token="t", capacity=1, http=http)


@pytest.fixture(autouse=True)
def quick(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(host_agent, "REGISTER_BACKOFF_FIRST_SECONDS", 0.01)
    monkeypatch.setattr(host_agent, "REGISTER_BACKOFF_MAX_SECONDS", 0.02)
    monkeypatch.setattr(get_settings(), "worker_heartbeat_seconds", 0.01)


def test_registration_is_tried_again_until_it_succeeds() -> None:
    host, tries = _host(), []

    async def register() -> None:
        tries.append(len(tries))
        if len(tries) == 1:
            raise RuntimeError("libvirt: cannot connect (libvirtd restarting)")
        if len(tries) == 2:
            raise ApiUnavailable("POST /api/worker/hosts: connection refused")

    host.register = register
    asyncio.run(host.register_until_done())
    assert len(tries) == 3


def test_a_host_told_to_stop_gives_up_registering() -> None:
    host, tries = _host(), []

    async def register() -> None:
        tries.append(1)
        host._stop.set()  # SIGTERM arrived meanwhile
        raise RuntimeError("still failing")

    host.register = register
    with pytest.raises(RuntimeError, match="still failing"):
        asyncio.run(host.register_until_done())
    assert len(tries) == 1


def test_the_heartbeat_survives_a_failure_and_a_failed_reregistration() -> None:
    beats, registered = [], []

    def api(request: httpx.Request) -> httpx.Response:
        beats.append(request.url.path)
        if len(beats) == 1:
            raise RuntimeError("something no one expected")
        return httpx.Response(409 if len(beats) == 2 else 200)  # the second: declared lost, register again

    host = _host(api)

    async def register() -> None:
        registered.append(1)
        if len(registered) == 1:
            raise ApiUnavailable("the API is away")

    host.register = register

    async def some_beats() -> None:
        task = asyncio.create_task(host._heartbeats())
        while len(beats) < 5:
            assert not task.done(), task  # alive through both failures
            await asyncio.sleep(0.01)
        task.cancel()

    asyncio.run(asyncio.wait_for(some_beats(), 10))
    assert len(registered) == 2  # the failed re-registration was tried again and succeeded
    assert set(beats) == {"/api/v1/worker/heartbeat"}


def test_a_registration_the_api_refuses_is_not_tried_again() -> None:
    """A revoked token is no passing trouble: the API's 401 ends the host with its error at once, while its
    503 (a control) is tried again."""
    answers = [503, 401]

    def api(request: httpx.Request) -> httpx.Response:
        return httpx.Response(answers.pop(0), json={"detail": "no"})

    host = _host(api)

    async def register() -> None:
        await host.api.register(HostBody())

    host.register = register
    with pytest.raises(httpx.HTTPStatusError) as refused:
        asyncio.run(host.register_until_done())
    assert refused.value.response.status_code == 401 and answers == []  # the 503 was tried again
