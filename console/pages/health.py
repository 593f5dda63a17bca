"""Health (admin): how runs are isolated on this host and how many of the company's runs wait or run.
Other companies' activity and the runner's internals are the operator's (`cleanroom health`)."""

from __future__ import annotations

from fastapi.responses import RedirectResponse
from nicegui import ui

from backend.runs.schemas import QueueHistory
from backend.system_schemas import Health
from console import charts, session, theme, widgets

VIRT = {
    "kvm": "KVM: hardware virtualization",
    "qemu": "software emulation (QEMU TCG): isolated, but slower",
}


def register() -> None:
    @ui.page("/health")
    async def health_page() -> RedirectResponse | None:
        if redirect := session.redirect_if_signed_out("/health", admin=True):
            return redirect
        api = session.api()
        with theme.frame("System health"):
            body = ui.column().classes("w-full gap-4")
            queue = ui.column().classes("w-full").mark("queue-history")
            ui.button("Refresh", icon="refresh", on_click=lambda: load()).props("flat")

        async def load() -> None:
            await widgets.load_into(body, api.health, render, "Checking the runner…")
            await widgets.load_into(queue, api.queue_history, render_queue, "Drawing the queue…")

        await ui.context.client.connected()
        await load()
        return None


def render_queue(history: QueueHistory) -> None:
    """The company's queue depth over the last day (the API computes it from the runs' own times)."""
    with ui.card().classes("w-full"):
        ui.plotly(charts.queue_depth(history)).classes("w-full").mark("chart-queue")


def render(health: Health) -> None:
    if health.runner_ok is False:
        widgets.error_box(
            "The VM runner reports a problem, so runs may wait. The operator sees the details on the host "
            "with `cleanroom health`."
        )
    with ui.card().classes("w-full").mark("health"), ui.grid(columns="auto 1fr").classes("gap-x-8 gap-y-2"):
        ui.label("Virtualization").classes("text-grey-7")
        virt = health.virt_type
        ui.label(VIRT.get(virt, str(virt or "unknown (no guest image or libvirt unavailable)"))).classes(
            "font-medium"
        ).mark("virt")
        ui.label("Guest image sha256").classes("text-grey-7")
        ui.label(str(health.image_hash or "not built yet")).classes("font-mono text-sm").mark("image")
        ui.label("Runs waiting in the queue").classes("text-grey-7")
        ui.label(f"{widgets.number(health.queue_length)} (your company's)").mark("queue")
        ui.label("Your company's runs running now").classes("text-grey-7")
        cap = health.max_concurrent_vms
        text = widgets.number(health.running_runs)
        ui.label(f"{text} (the host runs at most {cap} VMs at once)" if cap is not None else text).mark(
            "running-vms"
        )
        if health.queue_depth_all is not None:
            ui.label("Runs waiting, all companies").classes("text-grey-7")
            ui.label(widgets.number(health.queue_depth_all)).mark("queue-all")
    workers = health.workers or []
    if workers:
        with ui.card().classes("w-full").mark("workers"):
            ui.label("Hypervisor hosts (fleet workers)").classes("font-medium")
            ui.table(
                columns=[
                    {"name": k, "label": label, "field": k, "align": "left"}
                    for k, label in (
                        ("host_id", "Host"),
                        ("state", "State"),
                        ("capacity", "VM slots"),
                        ("running", "Running"),
                        ("heartbeat", "Last heartbeat"),
                    )
                ],
                rows=[
                    {
                        "host_id": w.host_id,
                        "state": ("draining" if w.draining else "up") if w.up else "lost",
                        "capacity": w.capacity,
                        "running": w.running,
                        "heartbeat": f"{w.heartbeat_age_seconds:.0f} s ago",
                    }
                    for w in workers
                ],
                row_key="host_id",
            ).classes("w-full")
