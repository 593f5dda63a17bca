"""At start the console asks the API whether they share the key that signs the browser's address
(backend/tenancy/forwarded.py), and refuses to run when they do not.

Why refuse rather than warn: with another key every signature is ignored and every sign-in is counted on
the console's own address, so one person typing wrong passwords turns everyone away (the lock-out the
forwarding exists to prevent), and nothing else would show it: sign-ins still work until someone floods.
A warning in a log nobody reads leaves exactly that. The mismatch is a setting to copy, found at start,
while the operator is watching; a console that cannot reach the API yet (it starts before the API under
`cleanroom serve`, or the API is restarting) keeps asking, and starts serving meanwhile.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from backend.tenancy import forwarded
from console.api import Api, ApiConfig, ApiError

log = logging.getLogger("cleanroom.console")

MISMATCH = (
    "the console's forwarding secret is not the API's: the API ignores the browser addresses this console "
    "signs, and would count every sign-in on the console's own address (one person's wrong passwords would "
    "turn everyone away). Give both the same CLEANROOM_CONSOLE_FORWARD_SECRET (at least 32 bytes), or the "
    "same data directory's console_forward_secret file; the console stops."
)


class Unanswered(Exception):
    """The API did not answer the probe (not reachable, not ready, or an error)."""


async def shares_key(config: ApiConfig, *, key: bytes | None = None) -> bool:
    """Whether the API verifies a probe signed with this console's key (or `key`)."""
    try:
        answer = await Api(config).forwarding_check(forwarded.probe_headers(key=key))
    except ApiError as exc:
        raise Unanswered(f"{config.base_url}: {exc.message}") from exc
    return answer.signed


async def check(
    config: ApiConfig,
    on_mismatch: Callable[[], None],
    *,
    key: bytes | None = None,
    first_wait: float = 1.0,
    longest_wait: float = 30.0,
) -> bool:
    """Asks until the API answers (waiting longer each time, a warning each time); on a mismatch logs why and
    calls `on_mismatch`. Returns whether the keys match."""
    wait = first_wait
    while True:
        try:
            match = await shares_key(config, key=key)
        except Unanswered as exc:
            log.warning(
                "cannot yet check the forwarding secret with the API (%s); asking again in %.0f s", exc, wait
            )
            await asyncio.sleep(wait)
            wait = min(wait * 2, longest_wait)
            continue
        if match:
            log.info("the console and the API share the forwarding secret")
            return True
        log.error(MISMATCH)
        on_mismatch()
        return False
