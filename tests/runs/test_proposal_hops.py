"""What a proposal hands to threads. Under load each hop waits for a thread of the default executor and then for
the event loop to take its answer: a probe of the API at a thousand assistants (docs/scale.md, item 15) put
about 80 ms of the slowest twentieth of proposals into ten such hops, most of them small (a README, a hash).
They are now one per step's code, one per dataset (its export built, written and scanned) and one for the
bundle's last files; the staged-data limits are read once and their folder check skipped when no failed run
keeps a bundle. Pinned here on SQLite and PostgreSQL alike; the control stages a second dataset and sees its
hop counted."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.runs import proposal

pytestmark = pytest.mark.usefixtures("acme_on")


@contextlib.contextmanager
def hops(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The functions handed to `asyncio.to_thread` inside the block, by name, in order."""
    seen: list[str] = []
    real = asyncio.to_thread

    async def counting(func: Any, /, *args: Any, **kwargs: Any) -> Any:
        seen.append(getattr(func, "__name__", repr(func)))
        return await real(func, *args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(asyncio, "to_thread", counting)
        yield seen


async def test_a_proposal_of_one_dataset_hands_three_things_to_threads(client, alice, monkeypatch) -> None:
    with hops(monkeypatch) as seen:
        r = await client.post("/api/runs", json=proposal(), headers=alice)
    assert r.status_code == 201, r.text
    assert seen == ["_checked_code", "_write_export", "_finish"]


async def test_control_a_second_dataset_is_a_hop_more(client, alice, monkeypatch) -> None:
    with hops(monkeypatch) as seen:
        r = await client.post("/api/runs", json=proposal(datasets=["deals", "tasks"]), headers=alice)
    assert r.status_code == 201, r.text
    assert seen == ["_checked_code", "_write_export", "_write_export", "_finish"]
