"""The one settings object, read once from the environment (prefix CLEANROOM_, plus DATABASE_URL)."""

from __future__ import annotations

import os
import re
import stat
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, Field
from pydantic_settings import BaseSettings, SettingsConfigDict

REPO_ROOT = Path(__file__).resolve().parent.parent
SHARED_RUN_DIR = Path("/var/lib/cleanroom-runs")  # 0710 with QEMU's group, made by the service


def _others_can_pass(folder: Path) -> bool:
    """Whether a user other than this root service can pass every existing ancestor of `folder`."""
    if os.geteuid() != 0:
        return True  # QEMU runs as this user (session libvirt)
    for step in folder.resolve().parents:
        try:
            if not step.stat().st_mode & stat.S_IXOTH:
                return False
        except OSError:
            continue
    return True


# a fleet worker's host id: it becomes part of domain names and paths (empty: the embedded worker)
HOST_ID_PATTERN = r"^[a-z0-9_]{0,32}$"


def valid_host_id(host_id: str) -> bool:
    return bool(host_id) and re.fullmatch(HOST_ID_PATTERN, host_id) is not None


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="CLEANROOM_", extra="ignore")

    data_dir: Path = REPO_ROOT / "var"
    # the Ed25519 key that signs audit exports (PEM, 0600; made on first use): default
    # data_dir/audit-signing/ed25519.pem. Kept outside the database, so whoever can write the table cannot sign.
    audit_signing_key: Path | None = None
    database_url: str | None = Field(
        default=None, validation_alias=AliasChoices("DATABASE_URL", "CLEANROOM_DATABASE_URL")
    )

    host: str = "127.0.0.1"
    api_port: int = 8400
    console_port: int = 8401
    api_base_url: str | None = None  # what the console calls; defaults to http://host:api_port
    # Where people's browsers reach the API and the console. Their origins are the only ones a cookie-signed
    # request may come from (CSRF), their hosts join the Host allow-list (DNS rebinding), and an https
    # public URL makes the session cookie `secure`.
    public_url: str | None = None  # defaults to api_base_url
    console_url: str | None = None  # defaults to http://host:console_port
    allowed_hosts: list[str] = []  # further Host names the API answers to (JSON list in the environment)
    secure_cookies: bool = False  # force `secure` even when the public URL is http; always HttpOnly + Strict
    # PostgreSQL connections an API process holds at most. Under load a connection stays taken while the
    # process's event loop gets round to the answer, so ten were all taken at once: at a thousand assistants
    # a query waited 42 ms for one at p95 (0.03 ms with twenty; docs/scale.md item 13). Each API process
    # (`serve --processes N`) has its own: N x this plus the job queue's few stay under PostgreSQL's
    # max_connections (100 by default).
    db_pool_size: int = Field(default=20, ge=1, le=200)
    # PostgreSQL: how long a statement of the API (its pool, the fleet's dispatcher and job queue) waits for
    # a lock, and runs at most, before it fails (0: no limit). A lock held by someone else for ever (a
    # fleet host's role cannot reach the API's locks any more, but an operator's stray session can) then
    # fails one request instead of freezing every writer and the pool with them (issue 52, D-M1). The
    # longest legitimate waits are turns on the audit chain's lock, a few hundred ms at a thousand
    # assistants (docs/scale.md), and the longest statements whole-table reads of the audit chain
    # (`audit verify`, seconds at millions of entries). Migrations, and the command line (run by the
    # operator, `audit verify` on a large chain), run without these (`db_migration_*`).
    db_lock_timeout_seconds: float = Field(default=10.0, ge=0)
    db_statement_timeout_seconds: float = Field(default=120.0, ge=0)
    # a migration (one transaction each) may rewrite a whole table: its own limits, none by default
    db_migration_lock_timeout_seconds: float = Field(default=0.0, ge=0)
    db_migration_statement_timeout_seconds: float = Field(default=0.0, ge=0)
    # every API answer carries `Server-Timing: app;dur=<ms>`, the time from the request reaching the app to
    # its answer's headers (the control-plane bench turns it on to tell the API's time from its own)
    server_timing: bool = False

    # sandbox
    libvirt_uri: str = "qemu:///system"
    # The user QEMU runs as (qemu.conf's `user`); None: read /etc/libvirt/qemu.conf, else libvirt-qemu/qemu.
    # Per-run directories give its group passage and the disks are its alone (backend/filemodes.py).
    qemu_user: str | None = None
    # Each guest's QEMU runs as its own uid and gid (the same number, no passwd entry needed) under a root
    # service: slot N uses guest_uid_base + N, guests booted without a slot take one of the next ids; a named
    # fleet host (host_id) uses a block of 100 of its own up to base + 29999, each uid held machine-wide
    # (backend/filemodes.py). 70000 lies where neither Debian (60000-64999, 65534), systemd's dynamic users
    # (61184-65519) nor the /etc/subuid ranges (100000 up) allocate; an id some user or group has is refused.
    guest_uid_base: int = 70000
    virt_type: Literal["auto", "kvm", "qemu"] = "auto"
    image_cache_dir: Path = Path("/var/cache/cleanroom/images")
    # The operator's extra guest packages: a requirements file of `name==version --hash=sha256:...` lines,
    # downloaded as wheels for the guest at image build and installed offline (backend/sandbox/guest_python.py);
    # its bytes are part of the recipe hash. An sdist is refused unless guest_allow_sdist (its build runs code).
    guest_requirements: Path | None = None
    guest_allow_sdist: bool = False
    run_dir: Path | None = None  # per-run scratch files; defaults to data_dir/runs
    max_wall_seconds: int = 120
    max_memory_mib: int = 2048
    max_vcpus: int = 2
    # vCPUs of a guest under software emulation (TCG). One: under QEMU 7.2's multi-threaded TCG a 2-vCPU guest
    # was caught with both vCPUs spinning in its kernel with interrupts off until the host's deadline (issue 24,
    # `cleanroom bench hangs`); with one vCPU no cross-CPU wait exists. Under KVM a guest gets max_vcpus.
    tcg_vcpus: int = 1
    max_concurrent_vms: int = 2
    # Scale-out (backend/fleet): "fleet" hands approved runs to `cleanroom worker` processes through the
    # procrastinate job queue on PostgreSQL; "in_process" runs them in the API process (the embedded default).
    workers: Literal["in_process", "fleet"] = "in_process"
    # this worker's host id: it namespaces domain names and saved-state slots
    host_id: str = Field(default="", pattern=HOST_ID_PATTERN)
    worker_heartbeat_seconds: float = 5.0
    worker_lost_seconds: float = 30.0  # a worker silent this long is lost: its runs are retried or ended
    # a run handed to a host and not claimed this long (its job lost, its worker killed before claiming, the
    # claim failing past its retries) goes back to the dispatcher and is handed out again; the claim stays
    # conditional, so a late job of its first hand-over is refused and the run starts once
    worker_claim_seconds: float = 60.0
    company_concurrency_cap: int = 2  # runs of one company handed to workers at once while others wait
    worker_url_seconds: int = 900  # how long a signed bundle or result URL stays valid
    use_saved_state: bool = True
    saved_state_slots: int = 4  # one saved warm guest per slot (restore keeps name+UUID)
    standby_vms: int = 2  # restored guests kept waiting when a service starts the standby pool
    # The service keeps `standby_vms` guests restored ahead of runs: auto = when the host has the memory for
    # them next to `max_concurrent_vms` running guests (see sandbox.standby.service_standby_count).
    standby_in_service: Literal["auto", "on", "off"] = "auto"
    job_disk_mib: int = 1024  # fixed (sparse) size of the per-run job disk: bounds the inputs
    kvm_probe_seconds: float = 10.0
    cold_boot_timeout_seconds: int = 240
    # a template guest's boot and warm-up (imports, a chart drawn, a model fitted) before its state is saved: set-up
    # work, not a run waiting, so it may take what a loaded machine needs (2-core, TCG, load 16: 154-201 s a slot,
    # two at once)
    template_boot_timeout_seconds: int = 900

    # runs
    # re-runs for evidence (backend/evidence/rerun.py) one company may ask for in 24 hours: they are not
    # charged, so this bounds the VM time an auditor's requests take (one at a time per company besides)
    rerun_daily_budget: int = Field(default=20, ge=0)
    max_attempts: int = 3
    max_actions_per_run: int = 500
    max_code_bytes: int = 200_000
    stdout_cap_bytes: int = 1_000_000
    max_schedules_per_company: int = 20
    # proposals one user may have waiting for a decision: each holds a staged bundle on disk
    max_pending_runs_per_user: int = 20
    # proposals (revisions and follow-ups included; a schedule's firings are not) in any rolling hour
    max_proposals_per_user_per_hour: int = 120
    max_proposals_per_company_per_hour: int = 600
    # staged bytes on disk of a company's runs, and of one user's: runs not yet ended (awaiting approval,
    # queued, waiting, running) and failed runs keeping their bundle for a revision (backend/runs/quotas.py)
    max_staged_bytes_per_company: int = 2 * 1024 * 1024 * 1024
    max_staged_bytes_per_user: int = 1024 * 1024 * 1024  # half the company's: one user never holds it all
    # How far below zero the assistant platform's charges may take a company's pool (what they charge already
    # happened, so a little overdraft is allowed); a charge that would go further is refused (402) and
    # audited, and nothing is recorded. 0: never below zero.
    platform_overdraft_credits: float = Field(default=100.0, ge=0)
    # a run that failed after its VM started keeps its bundle this long (it can be revised), then loses it
    failed_bundle_retention_days: float = 7.0
    bundle_sweep_minutes: float = 15.0  # how often the worker deletes bundles past their retention
    schedule_check_seconds: float = 15.0  # how often the dispatching loop fires the schedules that fell due
    metrics_token: str | None = None  # GET /metrics wants 'Bearer <it>' from anyone; unset: metrics are off
    # log lines (backend/observe.py): one JSON object per line, or plain text; auto: text on a terminal
    # (the demo, `scripts/run`), JSON otherwise (a service: its stderr goes to the journal)
    log_format: Literal["auto", "json", "text"] = "auto"
    min_schedule_interval_minutes: int = 15  # a cron firing more often than this is refused
    # flows: a step's /work/output/conclusion.json, handed to every later step, is at most this big
    flow_conclusion_max_bytes: int = 16 * 1024

    # drive / staging
    max_upload_bytes: int = 100 * 1024 * 1024
    export_row_cap: int = 5000
    # conversion of Drive files to text (backend/convert/)
    convert_max_rows_per_sheet: int = 100_000
    convert_max_cells: int = 5_000_000
    convert_max_unzipped_bytes: int = 512 * 1024 * 1024
    convert_time_limit_seconds: float = 30.0
    convert_max_pdf_pages: int = 500
    convert_max_image_pixels: int = 50_000_000
    convert_max_ocr_pages: int = 20
    # at most this much of a converter's answer is read (JSON: ~17 bytes a cell, so a 5M-cell sheet is ~90 MB)
    convert_max_output_bytes: int = 256 * 1024 * 1024

    # company-defined datasets: imports from files and syncs from the company's PostgreSQL (issue 54)
    import_max_rows: int = 2_000_000
    import_max_bytes: int = 512 * 1024 * 1024
    import_time_limit_seconds: float = 900.0
    # seals sync sources' connection strings (a Fernet key); unset: the file source_secret_key in the data dir
    source_secret_key: str | None = None
    sync_connect_timeout_seconds: float = 10.0
    sync_statement_timeout_seconds: float = 60.0  # each statement on the source
    sync_timeout_seconds: float = 600.0  # one whole sync
    sync_max_rows: int = 2_000_000
    sync_max_bytes: int = 1024 * 1024 * 1024

    # auth
    login_attempts_per_window: int = 5
    login_window_seconds: int = 60
    login_attempts_per_ip: int = 20  # failed sign-ins per window from one address, across e-mails
    # failed sign-ins of one e-mail, from any address it never signed in from, before each further one waits
    # (a window, doubling; the addresses it signed in from are exempt: backend/tenancy/login_limits.py)
    login_attempts_per_account: int = 10
    login_known_addresses_per_account: int = 10  # the latest addresses an account signed in from, remembered
    login_known_address_days: int = 90  # ... while used within this many days
    # signs the browser address the console forwards with a sign-in (backend/tenancy/forwarded.py), at least
    # 32 bytes (shorter: serve and the console refuse to start); unset: the file console_forward_secret in the
    # data directory
    console_forward_secret: str | None = None
    login_attempts_keep_windows: int = 10  # attempts older than this many windows are pruned
    login_hash_concurrency: int = 2  # password checks at once (argon2: 64 MiB and a core each)
    login_hash_queue: int = (
        32  # sign-ins waiting for a check, per lane (known, fresh), before new ones get 429
    )
    session_hours: int = 12
    # argon2's parameters for new password hashes: "standard" (argon2-cffi's defaults, 64 MiB) everywhere
    # but the test suite, which sets "cheap" (tests/conftest.py); a stored hash made with other parameters is
    # rehashed at its next sign-in (backend/tenancy/passwords.py)
    password_hash_profile: Literal["standard", "cheap"] = "standard"
    # how long an invitation and a password-reset link stay valid
    invite_link_hours: int = Field(default=72, ge=1, le=24 * 30)
    reset_link_hours: int = Field(default=2, ge=1, le=72)

    # mail (invitations, password resets): sent when smtp_host is set; otherwise the admin or the operator
    # sees the link once and passes it on (a forgotten-password request then sends nothing)
    smtp_host: str | None = None
    smtp_port: int = 587
    smtp_starttls: bool = True  # STARTTLS before signing in; false only for a relay on this host
    smtp_username: str | None = None
    smtp_password: str | None = Field(default=None, repr=False)
    smtp_from: str = "cleanroom@localhost"
    smtp_timeout_seconds: float = 10.0

    # notifications (backend/notify, docs/notifications.md): mails go through the SMTP settings above; webhooks
    # are a company's. A failed message is tried again after base, 2×base, 4×base … seconds (at most an hour
    # apart), `notify_max_attempts` times in all; every serving process looks for due retries every
    # `notify_poll_seconds`
    notify_retry_base_seconds: float = Field(default=30.0, gt=0)
    notify_max_attempts: int = Field(default=8, ge=1, le=50)
    notify_poll_seconds: float = Field(default=5.0, gt=0)
    notify_webhook_timeout_seconds: float = Field(default=10.0, gt=0)
    # who is told that a worker host was lost besides the admins of the companies whose runs it held
    notify_operator_emails: list[str] = []
    # webhook endpoints may point at loopback, private and reserved addresses (internal receivers). Off by
    # default: a company admin must not make the API a probe of the operator's own network
    webhook_allow_private: bool = False

    def postgres_timeouts(self, *, migration: bool = False) -> dict[str, str]:
        """The API's `lock_timeout` and `statement_timeout` (or a migration's), as PostgreSQL settings a
        connection is opened with (asyncpg's `server_settings`, libpq's `options`)."""
        lock, statement = (
            (self.db_migration_lock_timeout_seconds, self.db_migration_statement_timeout_seconds)
            if migration
            else (self.db_lock_timeout_seconds, self.db_statement_timeout_seconds)
        )
        return {
            "lock_timeout": f"{round(lock * 1000)}ms",
            "statement_timeout": f"{round(statement * 1000)}ms",
        }

    @property
    def effective_database_url(self) -> str:
        return self.database_url or f"sqlite:///{self.data_dir / 'cleanroom.sqlite3'}"

    @property
    def is_postgres(self) -> bool:
        return self.effective_database_url.startswith(("postgres://", "postgresql://"))

    @property
    def effective_run_dir(self) -> Path:
        """Where per-run disks live. QEMU (another user under a root service) must pass every folder on the
        way, and no folder outside the data directory is ever opened up for it: a data directory under a
        private folder (a checkout in /root, pytest's 0700 temporary root) puts runs in SHARED_RUN_DIR."""
        if self.run_dir is not None:
            return self.run_dir
        return self.data_dir / "runs" if _others_can_pass(self.data_dir) else SHARED_RUN_DIR

    @property
    def effective_api_base_url(self) -> str:
        return self.api_base_url or f"http://{self.host}:{self.api_port}"

    @property
    def effective_public_url(self) -> str:
        return self.public_url or self.effective_api_base_url

    @property
    def effective_console_url(self) -> str:
        return self.console_url or f"http://{self.host}:{self.console_port}"

    @property
    def cookies_secure(self) -> bool:
        """A session cookie sent over plain http from an https deployment is a stolen session."""
        return self.secure_cookies or self.effective_public_url.lower().startswith("https://")


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()
