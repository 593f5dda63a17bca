"""The one Piccolo app holding every table; its migrations live in backend/migrations."""

from __future__ import annotations

from pathlib import Path

from piccolo.conf.apps import AppConfig

from backend.db import all_tables

APP_CONFIG = AppConfig(
    app_name="cleanroom",
    migrations_folder_path=str(Path(__file__).parent / "migrations"),
    table_classes=all_tables(),
    migration_dependencies=[],
    commands=[],
)
