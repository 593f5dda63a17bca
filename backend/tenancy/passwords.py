"""Passwords: the policy, argon2 hashing at the configured profile, and the rehash a sign-in triggers when the
stored hash's parameters are not the current ones. The one place a password is hashed or checked against the
policy (people.py sets them; service.py signs in with them).

The policy: at least 12 characters, at most 1000; not one of the common passwords zxcvbn ships (its 30,000
most frequent passwords, and its English words and names, matched case-insensitively); and a zxcvbn score of
at least 3 (so a keyboard walk, a repeated run or a l33t-spelled list entry is refused as well). Only a demo
company (`cleanroom demo seed`) keeps the demo's short passwords: anywhere else a password that fails the
policy no longer signs in, whoever set it, and its owner sets a new one by a reset link.
"""

from __future__ import annotations

from functools import lru_cache
from typing import TypedDict

from argon2 import PasswordHasher

from backend.errors import Invalid
from backend.settings import get_settings

MIN_LENGTH = 12
MAX_LENGTH = 1000
MIN_SCORE = 3  # zxcvbn: 0 (too guessable) .. 4 (very unguessable)
_SCORED_PREFIX = 100  # zxcvbn's matching grows with the length: the first 100 characters are scored


class _Profile(TypedDict, total=False):
    """PasswordHasher's cost parameters a profile may set (the rest keep argon2-cffi's defaults)."""

    time_cost: int
    memory_cost: int
    parallelism: int


PROFILES: dict[str, _Profile] = {
    "standard": {},  # argon2-cffi's defaults: argon2id, 64 MiB, 3 passes (tests/tenancy/test_password_hashing.py)
    "cheap": {"time_cost": 1, "memory_cost": 8, "parallelism": 1},  # the test suite's, never a deployment's
}


@lru_cache(maxsize=len(PROFILES))
def hasher(profile: str | None = None) -> PasswordHasher:
    """The argon2 hasher of `profile` (default: the configured one)."""
    return PasswordHasher(**PROFILES[profile or get_settings().password_hash_profile])


def hash_password(password: str) -> str:
    return hasher().hash(password)


@lru_cache(maxsize=len(PROFILES))
def _dummy(profile: str) -> str:
    return hasher(profile).hash("not-a-real-password")


def dummy_hash() -> str:
    """A hash nobody's password matches, at the current profile: an unknown address, a person without a
    password yet, cost the same verify as a real one (sign-in, own password change)."""
    return _dummy(get_settings().password_hash_profile)


def needs_rehash(stored_hash: str) -> bool:
    """Whether a hash that just verified was made with other parameters than the current profile's."""
    try:
        return hasher().check_needs_rehash(stored_hash)
    except Exception:  # an unparsable hash never verified in the first place
        return False


@lru_cache(maxsize=1)
def _common() -> frozenset[str]:
    from zxcvbn.frequency_lists import FREQUENCY_LISTS

    return frozenset(word.lower() for words in FREQUENCY_LISTS.values() for word in words)


def problem(password: str, *, email: str = "", name: str = "") -> str | None:
    """Why `password` is refused, or None when it may be set."""
    if len(password) < MIN_LENGTH:
        return f"a password needs at least {MIN_LENGTH} characters"
    if len(password) > MAX_LENGTH:
        return f"a password has at most {MAX_LENGTH} characters"
    if password.strip().lower() in _common():
        return "this password is in a list of common passwords; choose another"
    from zxcvbn import zxcvbn

    hints = [part for part in (email, email.partition("@")[0], name, *name.split()) if part]
    if zxcvbn(password[:_SCORED_PREFIX], user_inputs=hints)["score"] < MIN_SCORE:
        return (
            "this password is too easy to guess (a common word, name, pattern or your own name or e-mail); "
            "a few unrelated words make a good one"
        )
    return None


def require_policy(password: str, *, email: str = "", name: str = "") -> None:
    reason = problem(password, email=email, name=name)
    if reason:
        raise Invalid(reason, code="weak_password")


def acceptable(password: str) -> bool:
    """At sign-in: whether the typed password (which verified) still meets the policy."""
    return problem(password) is None
