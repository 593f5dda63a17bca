"""The guest agent as a module: loaded from its path without running `main()` (it is PID 1 only in a VM)."""

from __future__ import annotations

from types import ModuleType

import pytest

from tests.support.guest import load_guest_agent


@pytest.fixture(scope="session")
def guest_agent() -> ModuleType:
    return load_guest_agent()
