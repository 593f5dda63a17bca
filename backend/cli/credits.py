"""The operator's credit commands (on the API's host, the API's database): the assistant platform's
credentials (`cleanroom platform token create|scope|revoke|list`), plans (`cleanroom plans list|set|assign`) and
top-ups (`cleanroom credits top-up`). Each change is audited, naming the operator."""

from __future__ import annotations

import json
import os

import typer

from backend.cli.support import group, run_db


def _operator() -> str:
    return f"cli:{os.environ.get('USER', 'root')}"


def _refs(companies: list[str]) -> list[int | str]:
    """--company values: an id when all digits, else a name."""
    return [int(c) if c.strip().isdigit() else c.strip() for c in companies]


def _scope_text(row: dict) -> str:
    if row.get("all_companies"):
        return "charges every company"
    names = [c["name"] if isinstance(c, dict) else c for c in row.get("companies") or []]
    return (
        "charges " + ", ".join(names)
        if names
        else "charges no company yet (`cleanroom platform token scope`)"
    )


def register(app: typer.Typer, bench_app: typer.Typer) -> None:
    platform_app = group("The assistant platform: the credential it charges chat turns with.")
    app.add_typer(platform_app, name="platform")
    token_app = group("Platform credentials: stored hashed, shown once, revocable.")
    platform_app.add_typer(token_app, name="token")

    @token_app.command("create")
    def token_create(
        name: str = typer.Argument(..., help="what the credential is for"),
        company: list[str] = typer.Option(
            [], "--company", help="a company (name or id) it may charge; repeat for more"
        ),
        all_companies: bool = typer.Option(
            False, "--all-companies", help="it may charge every company (an explicit choice)"
        ),
    ) -> None:
        """A new platform credential, printed once (only its hash is kept): it reaches POST
        /api/platform/charges and nothing else, for the companies named (--company, repeatable) or every
        company (--all-companies)."""
        from backend.credits import platform

        row = run_db(
            lambda: platform.create_token(
                name, created_by=_operator(), companies=_refs(company), all_companies=all_companies
            )
        )
        typer.echo(
            f"platform credential {row['id']} ({row['name']}, {_scope_text(row)}), shown only now:", err=True
        )
        typer.echo(row["token"])

    @token_app.command("scope")
    def token_scope(
        token_id: int = typer.Argument(..., help="its id (`cleanroom platform token list`)"),
        company: list[str] = typer.Option(
            [], "--company", help="a company (name or id) it may charge; repeat for more"
        ),
        all_companies: bool = typer.Option(
            False, "--all-companies", help="it may charge every company (an explicit choice)"
        ),
    ) -> None:
        """Set the companies a platform credential may charge (replacing its earlier ones). A credential made
        before credentials were scoped charges nobody until this names its companies."""
        from backend.credits import platform

        row = run_db(
            lambda: platform.scope_token(
                token_id, actor=_operator(), companies=_refs(company), all_companies=all_companies
            )
        )
        typer.echo(f"platform credential {token_id} ({row['prefix']}…, {row['name']}): {_scope_text(row)}")

    @token_app.command("revoke")
    def token_revoke(
        token_id: int = typer.Argument(..., help="its id (`cleanroom platform token list`)"),
    ) -> None:
        """Revoke a platform credential: its charges are refused from now on."""
        from backend.credits import platform

        row = run_db(lambda: platform.revoke_token(token_id, actor=_operator()))
        typer.echo(f"revoked platform credential {token_id} ({row['prefix']}…, {row['name']})")

    @token_app.command("list")
    def token_list(json_out: bool = typer.Option(False, "--json", help="one JSON list")) -> None:
        """Every platform credential: id, name, prefix, last use, revoked."""
        from backend.credits import platform

        rows = run_db(platform.tokens)
        if json_out:
            typer.echo(json.dumps(rows, indent=2, sort_keys=True, default=str))
            return
        for t in rows:
            used = t["last_used_at"].isoformat(timespec="seconds") if t["last_used_at"] else "never"
            typer.echo(
                f"{t['id']:<4} {t['prefix']}…  {t['name']:<24} last used {used}  {_scope_text(t)}"
                f"{'  revoked' if t['revoked'] else ''}"
            )

    plans_app = group("Plans: name → monthly credits; a company's pool is its plan's, each month.")
    app.add_typer(plans_app, name="plans")

    @plans_app.command("list")
    def plans_list(json_out: bool = typer.Option(False, "--json", help="one JSON object")) -> None:
        """Every plan and its monthly credits."""
        from backend.credits import operator

        known = run_db(operator.plans)
        if json_out:
            typer.echo(json.dumps(known, indent=2, sort_keys=True))
            return
        for name, monthly in sorted(known.items(), key=lambda kv: kv[1]):
            typer.echo(f"{name:<20} {monthly} credits a month")

    @plans_app.command("set")
    def plans_set(
        name: str = typer.Argument(..., help="the plan's name"),
        credits: int = typer.Argument(..., help="its monthly credits"),
    ) -> None:
        """Define a plan or change its monthly credits (the companies on it get the new pool at once)."""
        from backend.credits import operator

        row = run_db(lambda: operator.set_plan(name, credits, actor=_operator()))
        typer.echo(
            f"plan {row['name']}: {row['monthly_credits']} credits a month ({row['companies']} companies)"
        )

    @plans_app.command("assign")
    def plans_assign(
        company: str = typer.Argument(..., help="the company's name or id"),
        plan: str = typer.Argument(..., help="the plan's name"),
    ) -> None:
        """Put a company on a plan: its pool becomes the plan's monthly credits."""
        from backend.credits import operator

        row = run_db(lambda: operator.assign(company, plan, actor=_operator()))
        typer.echo(f"{row['company']}: plan {row['plan']}, {row['credit_pool']} credits a month")

    credits_app = group("Company credit pools (the operator's).")
    app.add_typer(credits_app, name="credits")

    @credits_app.command("top-up")
    def top_up(
        company: str = typer.Argument(..., help="the company's name or id"),
        credits: int = typer.Argument(..., help="credits to add to this period's pool"),
        reason: str = typer.Option(..., "--reason", help="why (kept in the audit trail)"),
    ) -> None:
        """Add credits to a company's pool for this period (it resets when the next month starts)."""
        from backend.credits import operator

        row = run_db(lambda: operator.top_up(company, credits, reason=reason, actor=_operator()))
        typer.echo(f"{row['company']}: +{row['credits']} credits this period ({row['reason']})")
