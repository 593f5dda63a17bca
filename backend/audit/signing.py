"""The key that signs what the trail hands out (the export's footer), kept outside the database.

Whoever can write the audit table can recompute every hash in it, so a hash chain alone proves nothing to
someone who holds only the file. The export's footer is therefore signed with an Ed25519 key that lives in
a file (settings `audit_signing_key`, default data_dir/audit-signing/ed25519.pem, 0600, made on first
use), never in the database. Its public key is published (`GET /api/audit/public-key`, `cleanroom audit
public-key`, the console's audit page shows its fingerprint), and scripts/verify_audit_export.py accepts an
export only when its signature verifies against a public key given on its command line.
"""

from __future__ import annotations

import base64
import threading
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from backend import filemodes
from backend.hashing import sha256_bytes
from backend.settings import get_settings

ALGORITHM = "ed25519"
DIRECTORY = "audit-signing"
_keys: dict[Path, Ed25519PrivateKey] = {}
_making = threading.Lock()


class KeyProblem(Exception):
    """The signing key file exists but cannot be used."""


def key_path() -> Path:
    settings = get_settings()
    return settings.audit_signing_key or settings.data_dir / DIRECTORY / "ed25519.pem"


def private_key() -> Ed25519PrivateKey:
    """The key, read once per file; made (0600, in a 0700 directory) when there is none yet."""
    target = key_path()
    key = _keys.get(target)
    if key is not None:
        return key
    with _making:
        if not target.exists():
            filemodes.private_dir(target.parent)
            made = Ed25519PrivateKey.generate().private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
            filemodes.new_private_file(target, made)  # False: another process made it first; read theirs
        try:
            loaded = serialization.load_pem_private_key(target.read_bytes(), password=None)
        except (OSError, ValueError, TypeError) as exc:
            raise KeyProblem(f"cannot read the audit signing key {target}: {exc}") from exc
        if not isinstance(loaded, Ed25519PrivateKey):
            raise KeyProblem(f"{target} is not an Ed25519 private key")
        _keys[target] = loaded
        return loaded


def public_raw() -> bytes:
    return private_key().public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def public_text() -> str:
    """The public key as the verifier takes it: the 32 raw bytes, base64."""
    return base64.b64encode(public_raw()).decode("ascii")


def fingerprint(raw: bytes | None = None) -> str:
    """sha256 of the raw public key, hex, first 32 digits: what the console shows and the footer names."""
    return sha256_bytes(public_raw() if raw is None else raw)[:32]


def verifies(message: bytes, signature: str) -> bool:
    """Whether `signature` (base64) is this key's over `message`."""
    try:
        private_key().public_key().verify(base64.b64decode(signature, validate=True), message)
    except (InvalidSignature, ValueError):
        return False
    return True


def sign(message: bytes) -> str:
    """The signature, base64."""
    return base64.b64encode(private_key().sign(message)).decode("ascii")
