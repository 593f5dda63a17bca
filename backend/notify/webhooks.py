"""A company's webhook endpoints: where they may point, their secret, and the signature a receiver checks.

Signature (docs/notifications.md has the receiver's side, `verify`):
    X-Cleanroom-Timestamp: <unix seconds when this attempt was signed>
    X-Cleanroom-Signature: v1=<hex HMAC-SHA256(secret, "<timestamp>." + body)>
    X-Cleanroom-Delivery: <the delivery's id, the same on every retry: a receiver drops one it has seen>
A receiver refuses a timestamp more than five minutes off its clock, and a delivery id seen before: a body
caught on the way cannot be replayed later, nor twice within the window (docs/notifications.md `verify`).

Where an endpoint may point: http(s) to a public address. Loopback, private, link-local, shared and reserved
addresses are refused unless the operator allows them (`CLEANROOM_WEBHOOK_ALLOW_PRIVATE=true`, for an
installation whose receivers are internal): a company admin must not make the API a probe of the operator's
own network. The name is resolved again at every delivery, and every address it resolves to is checked.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import ipaddress
import secrets
import socket
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from backend.errors import Invalid
from backend.settings import get_settings

SECRET_PREFIX = "whsec_"


def new_secret() -> str:
    return SECRET_PREFIX + secrets.token_urlsafe(32)


def sign(secret: str, timestamp: int, body: bytes) -> str:
    mac = hmac.new(secret.encode(), str(timestamp).encode() + b"." + body, hashlib.sha256)
    return "v1=" + mac.hexdigest()


def signed_headers(
    secret: str, body: bytes, delivery_id: int, event: str, now: float | None = None
) -> dict[str, str]:
    timestamp = int(now if now is not None else time.time())
    return {
        "Content-Type": "application/json",
        "User-Agent": "Cleanroom-Webhook/1",
        "X-Cleanroom-Event": event,
        "X-Cleanroom-Delivery": str(delivery_id),
        "X-Cleanroom-Timestamp": str(timestamp),
        "X-Cleanroom-Signature": sign(secret, timestamp, body),
    }


def _public(address: str) -> bool:
    ip = ipaddress.ip_address(address)
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_global and not ip.is_multicast


def check_url(url: str) -> tuple[str, int]:
    """(host, port) of a well-formed http(s) URL; Invalid otherwise (no credentials in it, no fragment)."""
    url = url.strip()
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise Invalid(f"url: not a URL ({exc})") from exc
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise Invalid("url: an http:// or https:// URL with a host name")
    if parts.username or parts.password:
        raise Invalid("url: no user name or password in the URL (the signature authenticates the sender)")
    if len(url) > 2000:
        raise Invalid("url: at most 2000 characters")
    return parts.hostname, port or (443 if parts.scheme == "https" else 80)


@dataclass(frozen=True)
class Destination:
    """Where a delivery connects: the address that was checked, not the name again. The name is resolved once;
    connecting by the name would resolve it a second time, and a name its owner points at a public address for
    the check and at 127.0.0.1 for the connection (DNS rebinding) would reach the operator's own network."""

    url: str  # the endpoint's URL with the checked address in place of the host name
    headers: dict[str, str]  # Host: the name, as the receiver expects it
    extensions: dict[str, Any]  # https: the name for SNI and the certificate check


async def check_destination(url: str) -> Destination:
    """The address to deliver to; Invalid when the URL's host is, or resolves to, an address an endpoint may not
    reach (see above)."""
    host, port = check_url(url)
    if get_settings().webhook_allow_private:
        return Destination(url.strip(), {}, {})
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise Invalid(f"url: {host} does not resolve ({exc.strerror or exc})") from exc
    addresses = sorted({str(info[4][0]) for info in infos})  # the host part of an IPv4 or IPv6 address
    refused = [a for a in addresses if not _public(a)]
    if refused:
        raise Invalid(
            f"url: {host} is a loopback, private or reserved address ({', '.join(refused)}); the operator "
            "allows internal receivers with CLEANROOM_WEBHOOK_ALLOW_PRIVATE=true",
            code="webhook_address_refused",
        )
    return pinned(url, addresses[0])


def pinned(url: str, address: str) -> Destination:
    """`url` sent to `address`: the name stays in Host (and in SNI for https, so the certificate is still
    checked against the name)."""
    parts = urlsplit(url.strip())
    host = parts.hostname or ""
    literal = f"[{address}]" if ":" in address else address
    netloc = f"{literal}:{parts.port}" if parts.port else literal
    name = f"{host}:{parts.port}" if parts.port else host
    extensions = {"sni_hostname": host} if parts.scheme == "https" else {}
    return Destination(urlunsplit(parts._replace(netloc=netloc)), {"Host": name}, extensions)
