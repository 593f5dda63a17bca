"""An assistant polling a run only reads: its token's "last used" is written at most once a minute, so polls
never queue for the database's write lock behind a run's filing (SQLite: one writer at a time)."""

from __future__ import annotations

from datetime import timedelta

from backend import clock
from backend.hashing import sha256_text
from backend.tenancy.tables import ApiToken


async def _last_used(headers: dict[str, str]):
    token = headers["Authorization"].removeprefix("Bearer ")
    row = (
        await ApiToken.select(ApiToken.last_used_at).where(ApiToken.token_hash == sha256_text(token)).first()
    )
    return row["last_used_at"]


async def test_polls_within_a_minute_write_last_used_once(client, alice) -> None:
    assert (await client.get("/api/me", headers=alice)).status_code == 200
    first = await _last_used(alice)
    assert first is not None  # the first use is recorded
    for _ in range(3):
        assert (await client.get("/api/me", headers=alice)).status_code == 200
    assert await _last_used(alice) == first  # later polls within the minute do not write
    # positive control: once the recorded use is older than the resolution, the next use writes again
    token = alice["Authorization"].removeprefix("Bearer ")
    earlier = clock.now() - clock.LAST_USED_RESOLUTION - timedelta(seconds=5)
    await ApiToken.update({ApiToken.last_used_at: earlier}).where(ApiToken.token_hash == sha256_text(token))
    assert (await client.get("/api/me", headers=alice)).status_code == 200
    assert await _last_used(alice) > earlier + clock.LAST_USED_RESOLUTION
