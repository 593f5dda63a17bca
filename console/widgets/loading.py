"""Loading through the API: a spinner, then the data or a readable error; an API call whose refusal becomes a
notification; the empty and switched-off states."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Generic, TypeVar

from nicegui import ui

from console import session
from console.api import Api, ApiError

T = TypeVar("T")


def loading(text: str = "Loading…") -> None:
    with ui.row().classes("items-center gap-2 text-grey-7").mark("loading"):
        ui.spinner(size="md")
        ui.label(text)


def error_box(message: str) -> None:
    card = ui.card().classes("w-full bg-red-1 border-l-4 border-red").mark("error")
    with card, ui.row().classes("items-center gap-2 no-wrap"):
        ui.icon("error", color="negative")
        ui.label(message).classes("text-red-10")


def empty_state(message: str, icon: str = "inbox") -> None:
    with ui.column().classes("items-center w-full py-8 text-grey-6").mark("empty"):
        ui.icon(icon).classes("text-5xl")
        ui.label(message)


FEATURE_OFF = (
    "Runs are not available: this company has turned off the assistant's ability to write, "
    "and with it code execution. A company admin can turn it back on in Settings."
)

FAILED = object()  # what `call` returns when the API refused (the message is already on screen)


async def call(coro: Awaitable[T]) -> T | object:
    """Await an API call; a refusal becomes a readable notification (a 401 sends the user to sign in)."""
    try:
        return await coro
    except ApiError as exc:
        if exc.status == 401:
            session.sign_out()
            ui.navigate.to("/login")
        else:
            ui.notify(exc.message, type="negative", multi_line=True, timeout=8000)
        return FAILED


async def load_into(
    container: ui.element,
    fetch: Callable[[], Awaitable[T]],
    render: Callable[[T], Any],
    text: str = "Loading…",
) -> None:
    """Show a spinner in `container`, fetch, then render the data (or a readable error) in its place."""
    container.clear()
    with container:
        loading(text)
    try:
        data = await fetch()
    except ApiError as exc:
        container.clear()
        if exc.status == 401:
            session.sign_out()
            ui.navigate.to("/login")
            return
        with container:
            error_box(exc.message)
        return
    container.clear()
    with container:
        result = render(data)
        if hasattr(result, "__await__"):
            await result


class LoadedView(Generic[T]):
    """One part of a page shown from one API read: a spinner, then `render(data)` (or a readable error) in
    `container`. `poll()` (on a page's `ui.timer`) reads again while what is shown may still change by itself
    (`moving`) and re-renders when the fresh read `differs`. A run's page and a flow's, a run's re-runs and its
    proposed actions are each one of these; a subclass says what to read and how to show it."""

    text = "Loading…"

    def __init__(self, container: ui.element, api: Api) -> None:
        self.container = container
        self.api = api  # taken while the page is built: timers and handlers run outside its request
        self.loading = False
        self.data: T | None = None

    async def fetch(self) -> T:
        raise NotImplementedError

    def render(self, data: T) -> Any:
        """Show `data` (inside the container); may be a coroutine."""
        raise NotImplementedError

    def moving(self, data: T) -> bool:
        """Whether what is shown may change without this page doing anything (a run queued, a re-run running)."""
        return False

    def differs(self, shown: T, fresh: T) -> bool:
        return fresh != shown

    async def load(self) -> None:
        self.loading = True
        try:
            await load_into(self.container, self.fetch, self._show, self.text)
        finally:
            self.loading = False

    async def _show(self, data: T) -> None:
        self.data = data
        result = self.render(data)
        if hasattr(result, "__await__"):
            await result

    async def poll(self) -> None:
        if self.loading or self.data is None or not self.moving(self.data):
            return
        try:
            fresh = await self.fetch()
        except Exception:  # noqa: BLE001 - keep polling through a blip
            return
        if self.differs(self.data, fresh):
            await self.load()
