"""The browser's address as the console forwards it, believed only with the console's signature.

People sign in through the console, which calls the API server-to-server: every sign-in reaches the API
from the console's one address. Counted on that address, a flood of wrong passwords through the login form
would turn every person away. So the console names the browser's address in a header, signed with a secret
it shares with the API (HMAC-SHA256 over the address and the time); the API counts sign-ins on that
address when the signature is right and fresh, and on the TCP peer otherwise: a forged or stale header is
ignored, so nobody can pick the address their guesses are counted on.

The secret is the setting `console_forward_secret`, else the file `console_forward_secret` in the data
directory, made 0600 by whichever process needs it first (the API and the console share the directory in
the embedded default; a separate console host gets the same value through the setting).
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import secrets
import time
from functools import lru_cache
from pathlib import Path

from backend import filemodes
from backend.settings import get_settings

ADDRESS_HEADER = "x-cleanroom-client-address"
SIGNATURE_HEADER = "x-cleanroom-client-address-signature"  # "<unix seconds>:<hex hmac>"
SECRET_FILE = "console_forward_secret"
FRESH_SECONDS = 60  # a signature older (or newer) than this is stale: a captured header cannot be replayed


def secret() -> bytes:
    configured = get_settings().console_forward_secret
    if configured:
        return configured.encode()
    return _secret_file(get_settings().data_dir / SECRET_FILE)


@lru_cache(maxsize=4)
def _secret_file(path: Path) -> bytes:
    if not path.exists():
        filemodes.new_private_file(path, secrets.token_urlsafe(32).encode())  # 0600 from the start
    return path.read_bytes().strip()


def _mac(key: bytes, address: str, at: int) -> str:
    return hmac.new(key, f"{address}|{at}".encode(), hashlib.sha256).hexdigest()


def headers(address: str, *, key: bytes | None = None, at: int | None = None) -> dict[str, str]:
    """What the console sends with a sign-in: the browser's address and its signature."""
    at = int(time.time()) if at is None else at
    return {ADDRESS_HEADER: address, SIGNATURE_HEADER: f"{at}:{_mac(key or secret(), address, at)}"}


def client_address(peer: str, address: str | None, signature: str | None) -> str:
    """The address to count a sign-in on: the forwarded one when signed by the console and fresh (and an IP
    address), else the TCP peer."""
    if not address or not signature:
        return peer
    at_text, _, mac = signature.partition(":")
    try:
        at = int(at_text)
        forwarded = str(ipaddress.ip_address(address.strip()))
    except ValueError:
        return peer
    if abs(time.time() - at) > FRESH_SECONDS:
        return peer
    if not hmac.compare_digest(mac.encode(), _mac(secret(), address, at).encode()):
        return peer
    return forwarded
