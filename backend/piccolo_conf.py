"""Piccolo's configuration module (PICCOLO_CONF=backend.piccolo_conf). `DB` is always backend.db's
current engine: the one `backend.db.configure()` chose, else the settings' database (the piccolo CLI)."""

from __future__ import annotations

from typing import Any

from piccolo.conf.apps import AppRegistry

from backend import db

APP_REGISTRY = AppRegistry(apps=["backend.piccolo_app"])


def __getattr__(name: str) -> Any:
    if name == "DB":
        return db.engine()
    raise AttributeError(name)
