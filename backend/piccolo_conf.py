"""Piccolo's configuration module (PICCOLO_CONF=backend.piccolo_conf). `DB` follows backend.db.configure()."""

from __future__ import annotations

from piccolo.conf.apps import AppRegistry

DB = None  # set by backend.db.configure(); the piccolo CLI gets the settings' database

APP_REGISTRY = AppRegistry(apps=["backend.piccolo_app"])


def _default_engine():  # for the piccolo CLI (`piccolo migrations new cleanroom --auto`)
    from backend.db import make_engine
    from backend.settings import get_settings

    return make_engine(get_settings().effective_database_url)


if DB is None:
    DB = _default_engine()
