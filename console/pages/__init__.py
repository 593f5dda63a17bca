"""Every console page; `register()` defines their routes (called once per app build)."""

from __future__ import annotations


def register() -> None:
    from console.pages import (
        access,
        account,
        audit,
        connect,
        credits,
        datasets,
        drive,
        flows,
        health,
        login,
        people,
        run_detail,
        runs,
        settings,
        sso,
        teams,
    )

    for module in (
        login,
        runs,
        run_detail,
        flows,
        drive,
        datasets,
        settings,
        credits,
        audit,
        health,
        access,
        connect,
        sso,
        people,
        teams,
        account,
    ):
        module.register()
