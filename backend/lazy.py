"""A package's public names loaded on first use (PEP 562), for packages whose light submodules (schemas, models,
status) are imported by clients: importing `backend.sandbox.models` runs `backend/sandbox/__init__.py` first, and
that must not pull in libvirt or the scanner with it (tests/test_import_graph.py checks the client's closure)."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def exports(package: str, names: dict[str, str]) -> Callable[[str], Any]:
    """A module `__getattr__` for `package`: `names` maps each public name to the submodule defining it."""

    def __getattr__(name: str) -> Any:
        if name not in names:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{names[name]}"), name)
        setattr(importlib.import_module(package), name, value)  # the next read is a plain attribute
        return value

    return __getattr__
