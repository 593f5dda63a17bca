from __future__ import annotations

from nicegui import ui

from backend.settings import get_settings


@ui.page("/")
def index() -> None:
    settings = get_settings()
    ui.label("Cleanroom console").classes("text-h5")
    ui.label(f"API: {settings.effective_api_base_url}")


def run() -> None:
    settings = get_settings()
    ui.run(host=settings.host, port=settings.console_port, title="Cleanroom", reload=False, show=False)
