"""Every console page; `register()` defines their routes (called once per app build)."""

from __future__ import annotations


def register() -> None:
    from console.pages import access, audit, credits, drive, flows, health, login, run_detail, runs, settings

    for module in (login, runs, run_detail, flows, drive, settings, credits, audit, health, access):
        module.register()
