"""`cleanroom datasets`: the company-defined datasets, as an operator scripts them (acting as an admin with
`--as`; the same service, checks and audit entries as the API). `list`, `templates`, `show`, `define`,
`update`. (File imports add `import` to this group.)"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer

from backend.cli.support import fail, group, run_db

DATASETS_APP = group("Datasets a company defines (and the built-ins, as templates).")


def _columns(specs: list[str]) -> list[dict[str, Any]]:
    """`name:kind`, `name:kind?` (may be empty: the default) or `name:kind!` (never empty), and for text
    `name:string=a|b|c` (an enum)."""
    out = []
    for raw in specs:
        name, _, rest = raw.partition(":")
        if not rest:
            fail(f"--column {raw!r}: write name:kind (string, integer, number, boolean, date, datetime)")
        kind, _, enum = rest.partition("=")
        nullable = not kind.endswith("!")
        kind = kind.rstrip("!?")
        out.append(
            {"name": name, "kind": kind, "nullable": nullable, "enum": enum.split("|") if enum else None}
        )
    return out


def _body(
    name: str,
    label: str,
    columns: list[str],
    key: str,
    writable: str | None,
    template: str | None,
    file: Path | None,
) -> Any:
    from backend.records.schemas import DatasetBody

    if file is not None:
        data = json.loads(file.read_text())
        data.setdefault("name", name)
        return DatasetBody.model_validate(data)
    return DatasetBody(
        name=name,
        label=label,
        columns=_columns(columns),  # type: ignore[arg-type]
        key_column=key,
        writable=[w.strip() for w in writable.split(",") if w.strip()] if writable is not None else None,
        template=template,
    )


def _echo(info: Any, as_json: bool) -> None:
    if as_json:
        typer.echo(info.model_dump_json(indent=1))
        return
    rows = "" if info.rows is None else f"\t{info.rows} rows"
    typer.echo(f"{info.name}\t{info.label}\t{info.origin}\tkey={info.key_column}{rows}")
    for c in info.columns:
        flags = ("" if c.nullable else " not-empty") + (f" one of {c.enum}" if c.enum else "")
        writable = " writable" if c.name in info.writable else ""
        typer.echo(f"  {c.name}\t{c.kind}{flags}{writable}")


def register(app: typer.Typer, bench_app: typer.Typer) -> None:
    app.add_typer(DATASETS_APP, name="datasets")

    @DATASETS_APP.command("list")
    def list_(
        as_email: str = typer.Option(..., "--as"), as_json: bool = typer.Option(False, "--json")
    ) -> None:
        """The datasets this user's company defined."""
        from backend.records.datasets_controller import definition_info
        from backend.records.defined import row_count
        from backend.records.visibility import company_datasets
        from backend.tenancy.context import load_user_context_by_email

        async def go() -> list[Any]:
            ctx = await load_user_context_by_email(as_email)
            found = [d for d in await company_datasets(ctx.company_id) if not d.builtin]
            return [definition_info(d, await row_count(d) if ctx.is_admin else None) for d in found]  # type: ignore[arg-type]

        infos = run_db(go)
        if as_json:
            typer.echo(json.dumps([i.model_dump(mode="json") for i in infos], indent=1))
            return
        for info in infos:
            _echo(info, False)

    @DATASETS_APP.command("templates")
    def templates(as_json: bool = typer.Option(False, "--json")) -> None:
        """The twelve built-in datasets a company-defined one may start from (`define --template NAME`)."""
        from backend.records.datasets import DATASETS
        from backend.records.datasets_controller import definition_info

        for dataset in DATASETS.values():
            _echo(definition_info(dataset), as_json)

    @DATASETS_APP.command("show")
    def show(
        name: str, as_email: str = typer.Option(..., "--as"), as_json: bool = typer.Option(False, "--json")
    ) -> None:
        """One company-defined dataset's definition."""
        from backend.records.datasets_controller import definition_info
        from backend.records.defined import get_defined, row_count
        from backend.tenancy.context import load_user_context_by_email

        async def go() -> Any:
            ctx = await load_user_context_by_email(as_email)
            dataset = await get_defined(ctx.company_id, name)
            return definition_info(dataset, await row_count(dataset) if ctx.is_admin else None)

        _echo(run_db(go), as_json)

    @DATASETS_APP.command("define")
    def define(
        name: str,
        as_email: str = typer.Option(..., "--as", help="a company admin"),
        label: str = typer.Option("", "--label"),
        column: list[str] = typer.Option(
            [], "--column", help="name:kind, name:kind! (never empty), name:string=a|b"
        ),
        key: str = typer.Option("", "--key", help="the external key column"),
        writable: str | None = typer.Option(None, "--writable", help="comma-separated; default every column"),
        template: str | None = typer.Option(None, "--template", help="start from a built-in (see templates)"),
        file: Path | None = typer.Option(
            None, "--file", exists=True, dir_okay=False, help="a DatasetBody JSON"
        ),
        as_json: bool = typer.Option(False, "--json"),
    ) -> None:
        """Define a dataset in the admin's company (audited, as from the API)."""
        from backend.records import defined
        from backend.records.datasets_controller import definition_info, spec_of
        from backend.tenancy.context import load_user_context_by_email

        body = _body(name, label, column, key, writable, template, file)

        async def go() -> Any:
            ctx = await load_user_context_by_email(as_email)
            return definition_info(await defined.define_dataset(ctx, spec_of(body)), 0)

        _echo(run_db(go), as_json)

    @DATASETS_APP.command("update")
    def update(
        name: str,
        as_email: str = typer.Option(..., "--as", help="a company admin"),
        label: str = typer.Option("", "--label"),
        column: list[str] = typer.Option([], "--column"),
        key: str = typer.Option("", "--key"),
        writable: str | None = typer.Option(None, "--writable"),
        file: Path | None = typer.Option(None, "--file", exists=True, dir_okay=False),
        as_json: bool = typer.Option(False, "--json"),
    ) -> None:
        """Replace a dataset's definition (columns, label, key, writable); its name stays."""
        from backend.records import defined
        from backend.records.datasets_controller import definition_info, spec_of
        from backend.tenancy.context import load_user_context_by_email

        body = _body(name, label, column, key, writable, None, file)

        async def go() -> Any:
            ctx = await load_user_context_by_email(as_email)
            dataset = await defined.update_dataset(ctx, name, spec_of(body, name))
            return definition_info(dataset, await defined.row_count(dataset))

        _echo(run_db(go), as_json)
