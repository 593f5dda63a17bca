"""THE visibility rule. The records API, exports, staging and proposed actions all ask this module.

A user sees a row of a dataset when:
  1. the row belongs to the user's company (always), and
  2. the user holds a permission for the dataset (no HR permission ⇒ no employees), and
  3. one of:
     - the row is company-wide,
     - the row is a team row and the user is in that team or manages it, or owns it and it has no team
       (its team was deleted: no one sees it through a team any more, its owner still does),
     - the row is private and the user owns it, manages a team the owner is in, or is a company admin.
Admins see every row of their company (they hold every dataset permission).

Drive files and folders carry the same owner/team/visibility columns and go through `owned_rows_where`,
the part of the rule that does not depend on a dataset permission, plus one more condition: a run's output
is tagged with the datasets the run read (`source_datasets`), and a non-admin sees it only while holding
read on every one of them. So an output computed from `employees` stays hidden from a team manager without
the HR permission, wherever Drive rows are listed, searched, downloaded or staged. The same condition,
`unreadable_sources`, withholds what a run printed and concluded (runs/read.py, flows/service.py) from a
requester who has since lost a permission its sources need.
"""

from __future__ import annotations

from typing import Any

from piccolo.columns.combination import And, Or, Where, WhereRaw
from piccolo.table import Table

from backend.errors import Forbidden, NotFound
from backend.records import tables as t
from backend.records.datasets import DATASETS, AnyDataset, Dataset, DefinedDataset
from backend.tenancy.context import UserContext


def builtin_dataset(name: str) -> Dataset:
    """A built-in dataset by name (no company needed); 404 for any other name."""
    dataset = DATASETS.get(name)
    if dataset is None:
        raise NotFound(
            {"message": f"unknown dataset {name!r}", "valid_datasets": sorted(DATASETS)},
            code="unknown_dataset",
        )
    return dataset


async def find_dataset(company_id: int, name: str) -> AnyDataset | None:
    """A built-in, or a dataset `company_id` defined, by name; None for any other name (another company's
    dataset of that name included: definitions are looked up within the caller's company only)."""
    builtin = DATASETS.get(name)
    if builtin is not None:
        return builtin
    row = (
        await t.DatasetDefinition.select()
        .where((t.DatasetDefinition.company == company_id) & (t.DatasetDefinition.name == name))
        .first()
    )
    return DefinedDataset.from_row(row) if row else None


async def company_datasets(company_id: int) -> list[AnyDataset]:
    """The built-ins, then the datasets the company defined (by name)."""
    rows = (
        await t.DatasetDefinition.select()
        .where(t.DatasetDefinition.company == company_id)
        .order_by(t.DatasetDefinition.name)
    )
    return [*DATASETS.values(), *(DefinedDataset.from_row(r) for r in rows)]


async def get_dataset(company_id: int, name: str) -> AnyDataset:
    dataset = await find_dataset(company_id, name)
    if dataset is None:
        raise NotFound(
            {"message": f"unknown dataset {name!r}", "valid_datasets": sorted(DATASETS)},
            code="unknown_dataset",
        )
    return dataset


async def require_dataset(ctx: UserContext, name: str, level: str = "read") -> AnyDataset:
    """The dataset, when `ctx` holds `level` on it (per-dataset permissions, built-in or company-defined
    alike); 404 for a name unknown in the caller's company, 403 without the permission."""
    dataset = await get_dataset(ctx.company_id, name)
    if not ctx.can(name, level):
        what = "read" if level == "read" else "change"
        raise Forbidden(
            f"{ctx.email} has no permission to {what} {name}: ask a company admin for the permission set "
            f"that grants {name} {level} access",
            code="dataset_forbidden",
        )
    return dataset


def visible_where(ctx: UserContext, dataset: AnyDataset) -> Any:
    """The WHERE clause selecting exactly the rows of `dataset` that `ctx` may see: `owned_rows_where` on its
    table, narrowed to the dataset's own rows for a company-defined one (they share `dataset_row`).

    Call `require_dataset` first; this function assumes the dataset permission was checked.
    """
    where = owned_rows_where(ctx, dataset.table)
    scope = dataset.scope()
    return where if scope is None else And(where, scope)


def owned_rows_where(ctx: UserContext, table: type[Table]) -> Any:
    """Company, then company-wide / team / private, for any table with company, owner, team, visibility;
    for tables with `source_datasets` (Drive), also: no source dataset the user cannot read."""
    same_company: Where = table.company == ctx.company_id
    if ctx.is_admin:
        return same_company
    allowed: Any = table.visibility == "company"
    if ctx.team_ids:
        allowed = Or(allowed, And(table.visibility == "team", table.team.is_in(sorted(ctx.team_ids))))
    private_owners = sorted({ctx.user_id, *ctx.managed_user_ids})
    allowed = Or(allowed, And(table.visibility == "private", table.owner.is_in(private_owners)))
    # a team row left without a team (its team deleted: tenancy/grid.delete_team) stays its owner's; a NULL
    # team is in no `team_ids`, so no one else sees it through a team
    orphaned = And(And(table.visibility == "team", table.team.is_null()), table.owner == ctx.user_id)
    allowed = Or(allowed, orphaned)
    where = And(same_company, allowed)
    if hasattr(table, "source_datasets"):
        for name in unreadable_sources(ctx, [*DATASETS, *ctx.company_datasets]):
            where = And(where, _not_derived_from(table, name))
    return where


def unreadable_sources(ctx: UserContext, sources: Any) -> list[str]:
    """The datasets among `sources` (the tags of a run's outputs) that `ctx` may not read: anything tagged
    with one of them is hidden from `ctx`. None for an admin; a tag that names no dataset (neither a built-in
    nor one the company defined) hides nothing."""
    if ctx.is_admin:
        return []
    return sorted(
        name
        for name in set(sources)
        if (name in DATASETS or name in ctx.company_datasets) and not ctx.can(name, "read")
    )


def _not_derived_from(table: type[Table], dataset: str) -> WhereRaw:
    """Rows whose `source_datasets` JSON list does not contain `dataset`. The list is matched as text
    (`"name"` with its quotes, LIKE wildcards escaped), which reads the same on SQLite and PostgreSQL."""
    column = f'"{table._meta.tablename}"."source_datasets"'
    escaped = dataset.replace("!", "!!").replace("%", "!%").replace("_", "!_")
    return WhereRaw(f"COALESCE(CAST({column} AS TEXT), '[]') NOT LIKE {{}} ESCAPE '!'", f'%"{escaped}"%')


async def visible_record(
    ctx: UserContext, dataset: AnyDataset, row_id: int, *columns: Any
) -> dict[str, Any] | None:
    """One row of `dataset` through `visible_where`, or None (as `visible_row`, for either kind of dataset)."""
    table = dataset.table
    return await table.select(*columns).where(And(visible_where(ctx, dataset), table.id == row_id)).first()


async def visible_row(
    ctx: UserContext, table: type[Table], row_id: int, *columns: Any
) -> dict[str, Any] | None:
    """One row (the given columns, or all) through the same WHERE clause, or None when the caller may not see
    it: another company's row, an unshared row and a missing row look the same. Records, proposed changes
    and Drive look single rows up here; there is no second, in-Python copy of the rule."""
    return await table.select(*columns).where(And(owned_rows_where(ctx, table), table.id == row_id)).first()
