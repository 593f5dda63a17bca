"""The browser's address as the console forwards it, believed only with the console's signature.

People sign in through the console, which calls the API server-to-server: every sign-in reaches the API
from the console's one address. Counted on that address, a flood of wrong passwords through the login form
would turn every person away. So the console names the browser's address in a header, signed with a secret
it shares with the API; the API counts sign-ins on that address when the signature is right, fresh and not
seen before, and on the TCP peer otherwise: a forged, stale or replayed header is ignored, so nobody can
pick the address their guesses are counted on.

The signature (HMAC-SHA256) covers what it is for (a sign-in, or the console's probe at start), the
address, the e-mail being signed in, the time and a random nonce. A header seen on the wire is good for
that one e-mail, for `FRESH_SECONDS`, once per API process (the nonces seen are remembered that long).

The secret is the setting `console_forward_secret` (at least `MIN_SECRET_BYTES` bytes: a shorter one is
refused at start), else the file `console_forward_secret` in the data directory, made 0600 by whichever
process needs it first (the API and the console share the directory in the embedded default; a separate
console host gets the same value through the setting). A console whose secret is not the API's would have
every sign-in counted on its own address again; it asks the API at start (`probe_headers`,
`GET /api/auth/forwarding`) and refuses to run on a mismatch (console/forwarding.py).

Behind a reverse proxy the address is only the browser's when the proxy is named in `FORWARDED_ALLOW_IPS`:
`unnamed_proxy` says when start-up settings show a proxy that it does not name, `proxy_unnamed` when a
sign-in arrives through one.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
import logging
import secrets
import time
from collections import OrderedDict
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from urllib.parse import urlsplit

from backend import filemodes
from backend.settings import Settings, get_settings

log = logging.getLogger("cleanroom.forwarded")

ADDRESS_HEADER = "x-cleanroom-client-address"
SIGNATURE_HEADER = "x-cleanroom-client-address-signature"  # "<unix seconds>:<nonce>:<hex hmac>"
SECRET_FILE = "console_forward_secret"
MIN_SECRET_BYTES = 32
FRESH_SECONDS = 30  # a signature older (or newer) than this is stale
SIGN_IN, PROBE = "sign-in", "probe"  # what a signature is for: one never passes for the other
PROBE_ADDRESS = "192.0.2.0"  # the address a probe names (TEST-NET-1: never a browser's)
_SEEN_MAX = 100_000  # nonces remembered at most (a replay within FRESH_SECONDS of a pushed-out one passes)


class ForwardSecretError(RuntimeError):
    """The configured secret is unfit: the API and the console refuse to start."""


def secret() -> bytes:
    configured = get_settings().console_forward_secret
    key = configured.encode() if configured else _secret_file(get_settings().data_dir / SECRET_FILE)
    if len(key) < MIN_SECRET_BYTES:
        where = (
            "CLEANROOM_CONSOLE_FORWARD_SECRET" if configured else str(get_settings().data_dir / SECRET_FILE)
        )
        raise ForwardSecretError(
            f"{where} is {len(key)} bytes; the secret that signs the browser's address the console forwards "
            f"must be at least {MIN_SECRET_BYTES} (make one with `python -c 'import secrets; "
            "print(secrets.token_urlsafe(32))'` and give the API and the console the same)"
        )
    return key


@lru_cache(maxsize=4)
def _secret_file(path: Path) -> bytes:
    if not path.exists():
        filemodes.new_private_file(path, secrets.token_urlsafe(32).encode())  # 0600 from the start
    return path.read_bytes().strip()


def _email(email: str) -> str:
    return email.strip().lower()  # as sign-in compares it (tenancy/service.py)


def _mac(key: bytes, purpose: str, address: str, email: str, at: int, nonce: str) -> str:
    message = json.dumps(["cleanroom forwarded address 2", purpose, address, _email(email), at, nonce])
    return hmac.new(key, message.encode(), hashlib.sha256).hexdigest()


def headers(
    address: str,
    email: str,
    *,
    key: bytes | None = None,
    at: int | None = None,
    nonce: str | None = None,
    purpose: str = SIGN_IN,
) -> dict[str, str]:
    """What the console sends with a sign-in of `email`: the browser's address and its signature."""
    at = int(time.time()) if at is None else at
    nonce = secrets.token_urlsafe(12) if nonce is None else nonce
    mac = _mac(key or secret(), purpose, address, email, at, nonce)
    return {ADDRESS_HEADER: address, SIGNATURE_HEADER: f"{at}:{nonce}:{mac}"}


def probe_headers(*, key: bytes | None = None) -> dict[str, str]:
    """The console's question at start: is this signed with your key?"""
    return headers(PROBE_ADDRESS, "", key=key, purpose=PROBE)


_seen: OrderedDict[str, float] = OrderedDict()  # nonce -> when it stops mattering (its signature is stale)


def verified(address: str | None, signature: str | None, email: str, purpose: str = SIGN_IN) -> str | None:
    """The forwarded address when the signature is the console's, for this purpose and e-mail, fresh, and
    its nonce not seen before (it is from now on); else None."""
    if not address or not signature:
        return None
    at_text, nonce, mac = (signature.split(":", 2) + ["", ""])[:3]
    try:
        at = int(at_text)
        forwarded = str(ipaddress.ip_address(address.strip()))
    except ValueError:
        return None
    now = time.time()
    if abs(now - at) > FRESH_SECONDS or not nonce:
        return None
    if not hmac.compare_digest(mac.encode(), _mac(secret(), purpose, address, email, at, nonce).encode()):
        return None
    while _seen and (len(_seen) >= _SEEN_MAX or next(iter(_seen.values())) < now):
        _seen.popitem(last=False)
    if nonce in _seen:
        return None  # a replay
    _seen[nonce] = at + FRESH_SECONDS
    return forwarded


def client_address(peer: str, address: str | None, signature: str | None, email: str) -> str:
    """The address to count a sign-in of `email` on: the forwarded one when `verified`, else the TCP peer."""
    return verified(address, signature, email) or peer


# --- a proxy FORWARDED_ALLOW_IPS does not name ------------------------------------------------------------


def _allowed(environ: Mapping[str, str]) -> list[str]:
    return [a.strip() for a in environ.get("FORWARDED_ALLOW_IPS", "").split(",") if a.strip()]


def names(peer: str, environ: Mapping[str, str]) -> bool:
    """Whether FORWARDED_ALLOW_IPS names `peer` (an address or a network in it, or "*"), as uvicorn reads it."""
    try:
        address = ipaddress.ip_address(peer)
    except ValueError:
        return False
    for entry in _allowed(environ):
        if entry == "*":
            return True
        try:
            if address in ipaddress.ip_network(entry, strict=False):
                return True
        except ValueError:
            continue
    return False


def _loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def unnamed_proxy(which: str, settings: Settings, environ: Mapping[str, str]) -> str | None:
    """At start: a warning when the settings show that people reach `which` ("api" or "console") through a
    proxy that FORWARDED_ALLOW_IPS does not name, else None. The rule: a proxy is in front when people's URL
    for it (`CLEANROOM_PUBLIC_URL`, `CLEANROOM_CONSOLE_URL`) is https (it serves plain http) or names a host
    other than this loopback address it listens on. Listening on loopback, the proxy is on this machine and
    must be named as 127.0.0.1 (or ::1); listening on another address, FORWARDED_ALLOW_IPS must name it."""
    url = settings.effective_public_url if which == "api" else settings.effective_console_url
    parts = urlsplit(url)
    host = parts.hostname or ""
    listens_on_loopback = _loopback(settings.host)
    proxied = parts.scheme == "https" or (listens_on_loopback and not _loopback(host))
    if not proxied:
        return None
    if listens_on_loopback:
        local = "::1" if settings.host.strip("[]") == "::1" else "127.0.0.1"
        if names(local, environ):
            return None
        need = f"name it: FORWARDED_ALLOW_IPS={local}"
    else:
        if _allowed(environ):
            return None
        need = "name its address in FORWARDED_ALLOW_IPS"
    return (
        f"the {which} is reached at {url} through a proxy that FORWARDED_ALLOW_IPS does not name: every "
        f"browser will look like the proxy, and sign-in limits per address will hold for all at once; {need}"
    )


_FORWARDING = ("x-forwarded-for", "forwarded", "x-real-ip")
# where a proxy of one's own sits: this machine, the private networks (RFC 1918, shared 100.64/10, IPv6 ULA)
_PROXY_NETWORKS = [
    ipaddress.ip_network(n)
    for n in (
        "127.0.0.0/8",
        "::1/128",
        "10.0.0.0/8",
        "172.16.0.0/12",
        "192.168.0.0/16",
        "100.64.0.0/10",
        "fc00::/7",
    )
]
_warned: set[str] = set()


def proxy_unnamed(peer: str, request_headers: Mapping[str, str], environ: Mapping[str, str]) -> bool:
    """While serving: whether a request came through a proxy FORWARDED_ALLOW_IPS does not name — it carries a
    forwarding header, its TCP peer is on this machine or a private network (where proxies sit; a header
    from elsewhere is only someone's claim), the peer is not named, and the peer is not the header's own
    address (which it is when a named proxy's header was believed)."""
    sent = [request_headers.get(h) for h in _FORWARDING if request_headers.get(h)]
    if not sent:
        return False
    try:
        address = ipaddress.ip_address(peer)
    except ValueError:
        return False
    if address.version == 6 and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    if not any(address in network for network in _PROXY_NETWORKS) or names(peer, environ):
        return False
    return not any(peer in value for value in sent)


def warn_unnamed_proxy(
    which: str, peer: str, request_headers: Mapping[str, str], environ: Mapping[str, str]
) -> None:
    """Logs, once per process and peer, a sign-in through a proxy that FORWARDED_ALLOW_IPS does not name."""
    if peer in _warned or len(_warned) >= 64 or not proxy_unnamed(peer, request_headers, environ):
        return
    _warned.add(peer)
    log.warning(
        "%s: sign-ins arrive through a proxy at %s that FORWARDED_ALLOW_IPS does not name; every browser behind "
        "it is counted as that one address (name the proxy in FORWARDED_ALLOW_IPS)",
        which,
        peer,
    )
