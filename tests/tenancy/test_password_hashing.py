"""Passwords are hashed with argon2id at its production parameters: the "standard" profile, the settings'
default (the test suite sets the cheapest profile, "cheap", in tests/conftest.py to sign in quickly)."""

from __future__ import annotations

from argon2 import PasswordHasher, Type, extract_parameters

from backend.settings import Settings
from backend.tenancy.passwords import PROFILES, hasher
from tests.support.databases import CHEAP_HASHER


def hash_password(password: str) -> str:
    """As a deployment hashes: the settings' default profile."""
    return hasher(Settings.model_fields["password_hash_profile"].default).hash(password)


def test_the_cheap_profile_is_the_tests_template_profile() -> None:
    cheap = extract_parameters(hasher("cheap").hash("x"))
    assert (cheap.time_cost, cheap.memory_cost, cheap.parallelism) == (
        CHEAP_HASHER.time_cost,
        CHEAP_HASHER.memory_cost,
        CHEAP_HASHER.parallelism,
    )
    assert set(PROFILES) == {"standard", "cheap"}


def test_production_hashes_use_argon2id_at_the_library_defaults() -> None:
    params = extract_parameters(hash_password("demo"))
    default = PasswordHasher()
    assert params.type == Type.ID
    assert (params.time_cost, params.memory_cost, params.parallelism) == (
        default.time_cost,
        default.memory_cost,
        default.parallelism,
    )
    assert params.memory_cost >= 64 * 1024  # KiB: at least 64 MiB per guess


def test_control_the_test_profile_is_told_apart() -> None:
    assert (
        extract_parameters(CHEAP_HASHER.hash("demo")).memory_cost
        < extract_parameters(hash_password("demo")).memory_cost
    )
