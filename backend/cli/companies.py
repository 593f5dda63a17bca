"""The operator's companies (on the API's host, the API's database): `cleanroom companies create "Name"
--admin EMAIL [--plan P]` starts a company and its first admin, who sets a password by a one-time link
(printed here; also mailed when SMTP is set); `companies list` and `companies show`. Audited, naming the
operator. No HTTP route creates a company: platform credentials are scoped to companies (review D-L4) and a
person's session belongs to one company, so starting one stays on the host, as plans and top-ups do."""

from __future__ import annotations

import json

import typer

from backend.cli.credits import _operator
from backend.cli.support import group, run_db


def _print_link(issued: dict) -> None:
    until = issued["expires_at"].strftime("%Y-%m-%d %H:%M UTC")
    if issued["mailed"]:
        typer.echo(f"a link to set their password was mailed to them (valid once, until {until})")
    else:
        typer.echo(f"give them this link to set their password (valid once, until {until}; shown only now):")
        typer.echo(issued["link"])


def register(app: typer.Typer, bench_app: typer.Typer) -> None:
    companies_app = group("Companies: the operator starts one and its first admin.")
    app.add_typer(companies_app, name="companies")

    @companies_app.command("create")
    def create(
        name: str = typer.Argument(..., help="the company's name"),
        admin: str = typer.Option(..., "--admin", help="the first admin's e-mail address"),
        admin_name: str = typer.Option("", "--admin-name", help="the first admin's name"),
        plan: str = typer.Option("team", "--plan", help="its plan (`cleanroom plans list`)"),
    ) -> None:
        """Start a company and its first admin; prints the admin's one-time link to set a password."""
        from backend.credits import operator

        row = run_db(
            lambda: operator.start_company(name, admin, plan=plan, admin_name=admin_name, actor=_operator())
        )
        company, invitation = row["company"], row["invitation"]
        typer.echo(
            f"company {company['id']}: {company['name']} (plan {company['plan']}, {company['credit_pool']} credits a month)"
        )
        typer.echo(f"first admin: {invitation['email']}")
        _print_link(invitation)

    @companies_app.command("admin")
    def admin(
        company: str = typer.Argument(..., help="the company's name or id"),
        email: str = typer.Argument(
            ..., help="the person to make an admin (of that company, or a new address)"
        ),
    ) -> None:
        """Give a company an admin again: a person of it becomes an active admin with a fresh link to set a
        password (their tokens are revoked); a new address is invited as an admin."""
        from backend.tenancy import people

        issued = run_db(lambda: people.operator_admin(company, email, actor=_operator()))
        _print_link(issued)

    @companies_app.command("list")
    def list_(json_out: bool = typer.Option(False, "--json", help="one JSON list")) -> None:
        """Every company: id, name, plan, pool, people, admins who can sign in."""
        from backend.tenancy import people

        rows = run_db(people.list_companies)
        if json_out:
            typer.echo(json.dumps(rows, indent=2, sort_keys=True, default=str))
            return
        if not rows:
            typer.echo('no company yet: cleanroom companies create "Name" --admin EMAIL')
        for c in rows:
            demo = "  (demo)" if c["demo"] else ""
            typer.echo(
                f"{c['id']:<4} {c['name']:<30} plan {c['plan']:<10} {c['people']} people, "
                f"{c['active_admins']} active admins{demo}"
            )

    @companies_app.command("show")
    def show(
        company: str = typer.Argument(..., help="the company's name or id"),
        json_out: bool = typer.Option(False, "--json", help="one JSON object"),
    ) -> None:
        """One company and its people (role, status)."""
        from backend.tenancy import people

        row = run_db(lambda: people.show_company(company))
        if json_out:
            typer.echo(json.dumps(row, indent=2, sort_keys=True, default=str))
            return
        typer.echo(f"{row['id']}: {row['name']} (plan {row['plan']}, {row['credit_pool']} credits a month)")
        for p in row["members"]:
            typer.echo(f"  {p['email']:<40} {p['role']:<8} {p['status']}")
