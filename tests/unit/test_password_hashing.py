"""Passwords are hashed with argon2id at its production parameters (the tests' demo template uses the
cheapest profile to sign in quickly; nothing outside tests/conftest.py does)."""

from __future__ import annotations

from argon2 import PasswordHasher, Type, extract_parameters

from backend.tenancy.service import hash_password
from tests.conftest import CHEAP_HASHER


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
