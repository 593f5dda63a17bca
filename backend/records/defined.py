"""Datasets a company defines, and the storage of their rows (issue 54). The design and its figures:
docs/datasets.md. The contract file imports and database syncs build on: /work/team/54-storage.md.

- `define_dataset` / `update_dataset`: a company admin's decision in a session (never an assistant token),
  confined to their own company, audited (`dataset.defined`, `dataset.updated`).
- `upsert_rows` / `delete_rows`: bulk writes of a dataset's rows by external key, for imports and syncs. They
  open no transaction of their own: inside the caller's `async with DatasetRow._meta.db.transaction():` they
  commit or roll back with it. Each row's owner, team and visibility come from its `owner_email`, `team` and
  `visibility` keys, else from the `RowDefaults` the caller chose.

Rows are read only through records/visibility.py (THE rule), exactly as a built-in table's rows are.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import orjson
from piccolo.columns.combination import And
from piccolo.engine.postgres import PostgresEngine
from piccolo.querystring import QueryString

from backend import clock
from backend.audit import service as audit
from backend.errors import Conflict, Forbidden, Invalid, NotFound
from backend.records import tables as t
from backend.records.columns import ColumnKind
from backend.records.datasets import DATASETS, SYSTEM_FIELDS, DefinedDataset, template_specs
from backend.records.values import TEXT_MAX, ColumnSpec, ValueProblem, json_coercer
from backend.records.visibility import visible_where
from backend.tenancy.context import UserContext
from backend.tenancy.tables import Team, User

log = logging.getLogger("cleanroom.records.defined")

NAME = re.compile(r"^[a-z][a-z0-9_]{0,39}$")  # a dataset's name: also its permission's and its CSV's
COLUMN = re.compile(r"^[a-z][a-z0-9_]{0,62}$")  # a column's name: written inline in JSON paths (service.py)
MAX_COLUMNS = 200
KEY_MAX = 200  # dataset_row.external_key's length
RESERVED = frozenset(
    {*SYSTEM_FIELDS, "owner_id", "team_id", "values", "external_key", "dataset", "cleanroom_visible_total"}
)
# a row's keys that set its ownership (they are also stored as values when the dataset has such a column)
OWNER_EMAIL, TEAM, VISIBILITY = "owner_email", "team", "visibility"
VISIBILITIES = t.VISIBILITIES


@dataclass
class DatasetSpec:
    """What an admin defines. `writable`: the columns a proposed change may set (None: every column)."""

    name: str
    label: str
    columns: list[ColumnSpec]
    key_column: str
    writable: list[str] | None = None
    template: str = ""


def spec_from_template(template: str, name: str, label: str = "", key_column: str = "") -> DatasetSpec:
    """A spec starting from one of the twelve built-ins: its columns, kinds, enums and writable columns. The key
    column is the caller's choice (default: the built-in's first column)."""
    builtin = DATASETS.get(template)
    if builtin is None:
        raise Invalid(
            {
                "message": f"no built-in dataset {template!r} to start from",
                "valid_templates": sorted(DATASETS),
            },
            code="unknown_template",
        )
    columns = template_specs(builtin)
    return DatasetSpec(
        name=name,
        label=label or builtin.label,
        columns=columns,
        key_column=key_column or columns[0].name,
        writable=list(builtin.writable_fields),
        template=template,
    )


def check_spec(spec: DatasetSpec) -> DatasetSpec:
    """The spec, checked: names, kinds, the key column and the writable ones; Invalid saying what is wrong."""
    problems: list[str] = []
    if not NAME.match(spec.name or ""):
        problems.append(
            "name must be 1-40 characters: lowercase letters, digits and _, starting with a letter"
        )
    elif spec.name in DATASETS:
        problems.append(f"{spec.name!r} is a built-in dataset's name; use it as a template instead")
    if not (spec.label or "").strip() or len(spec.label) > 200:
        problems.append("label must be 1-200 characters")
    if not spec.columns:
        problems.append("a dataset needs at least one column")
    if len(spec.columns) > MAX_COLUMNS:
        problems.append(f"a dataset has at most {MAX_COLUMNS} columns")
    seen: set[str] = set()
    for column in spec.columns:
        if not COLUMN.match(column.name or ""):
            problems.append(
                f"column {column.name!r}: 1-63 lowercase letters, digits and _, starting with a letter"
            )
        elif column.name in RESERVED:
            problems.append(f"column {column.name!r} is a name every record has already")
        if column.name in seen:
            problems.append(f"column {column.name!r} appears twice")
        seen.add(column.name)
        if column.enum and column.kind is not ColumnKind.string:
            problems.append(f"column {column.name!r}: only text columns have enums")
        if column.enum and (len(column.enum) > 500 or any(not isinstance(v, str) for v in column.enum)):
            problems.append(f"column {column.name!r}: an enum is at most 500 text values")
        if column.max_length is not None and (column.kind is not ColumnKind.string or column.max_length < 1):
            problems.append(f"column {column.name!r}: max_length is a positive length of a text column")
    if spec.key_column not in seen:
        problems.append(f"key column {spec.key_column!r} is not one of the columns")
    writable = list(
        dict.fromkeys(spec.writable if spec.writable is not None else [c.name for c in spec.columns])
    )
    unknown = [w for w in writable if w not in seen]
    if unknown:
        problems.append(f"writable columns {unknown} are not columns of the dataset")
    if spec.template and spec.template not in DATASETS:
        problems.append(f"no built-in dataset {spec.template!r} to start from")
    if problems:
        raise Invalid({"message": "; ".join(problems), "problems": problems}, code="invalid_dataset")
    columns = [
        ColumnSpec(
            c.name,
            c.kind,
            c.nullable and c.name != spec.key_column,  # every row has its key
            (c.max_length or TEXT_MAX) if c.kind is ColumnKind.string else None,
            tuple(c.enum) if c.enum else None,
        )
        for c in spec.columns
    ]
    return DatasetSpec(spec.name, spec.label.strip(), columns, spec.key_column, writable, spec.template)


def _require_admin(ctx: UserContext, what: str) -> None:
    ctx.require_person(what)  # a session or the operator: never the assistant's token, never an auditor
    if not ctx.is_admin:
        raise Forbidden(
            f"only a company admin can {what.removesuffix(' a dataset')} datasets", code="forbidden"
        )


def _definition_values(spec: DatasetSpec) -> dict[str, Any]:
    return {
        "label": spec.label,
        "columns": json.dumps([c.describe() for c in spec.columns]),
        "key_column": spec.key_column,
        "writable": json.dumps(spec.writable),
        "template": spec.template,
    }


async def define_dataset(ctx: UserContext, spec: DatasetSpec) -> DefinedDataset:
    """A new dataset of the admin's company; 409 when the company has one of that name."""
    _require_admin(ctx, "defining a dataset")
    spec = check_spec(spec)
    table = t.DatasetDefinition
    if await table.exists().where((table.company == ctx.company_id) & (table.name == spec.name)):
        raise Conflict(f"this company already has a dataset named {spec.name!r}", code="dataset_exists")
    now = clock.now()
    values = _definition_values(spec)
    await table.insert(
        table(
            company=ctx.company_id,
            name=spec.name,
            created_by=ctx.email,
            created_at=now,
            updated_at=now,
            version=1,
            **values,
        )
    )
    dataset = await get_defined(ctx.company_id, spec.name)
    await audit.record(
        "dataset.defined",
        actor=ctx.actor,
        company_id=ctx.company_id,
        subject_type="dataset",
        subject_id=spec.name,
        data={**_audited(spec), "via": ctx.via()},
    )
    return dataset


async def update_dataset(ctx: UserContext, name: str, spec: DatasetSpec) -> DefinedDataset:
    """The admin's new definition of `name` (the name stays). Once the dataset has rows, a column keeps its
    kind and the key column stays: rows already stored were checked against them."""
    _require_admin(ctx, "changing a dataset")
    current = await get_defined(ctx.company_id, name)
    spec = check_spec(
        DatasetSpec(name, spec.label, spec.columns, spec.key_column, spec.writable, spec.template)
    )
    row = t.DatasetRow
    if await row.exists().where(row.dataset == current.id):
        before = {c.name: c.kind for c in current.columns}
        changed = [c.name for c in spec.columns if c.name in before and before[c.name] is not c.kind]
        if changed or spec.key_column != current.key_column:
            raise Conflict(
                {
                    "message": "the dataset has rows: a column's kind and the key column cannot change "
                    "(define a new dataset and import into it)",
                    "changed_kinds": changed,
                },
                code="dataset_has_rows",
            )
    table = t.DatasetDefinition
    values = {getattr(table, k): v for k, v in _definition_values(spec).items()}
    values[table.updated_at] = clock.now()
    values[table.version] = current.version + 1
    await table.update(values).where(table.id == current.id)
    await audit.record(
        "dataset.updated",
        actor=ctx.actor,
        company_id=ctx.company_id,
        subject_type="dataset",
        subject_id=name,
        data={**_audited(spec), "via": ctx.via()},
    )
    return await get_defined(ctx.company_id, name)


def _audited(spec: DatasetSpec) -> dict[str, Any]:
    return {
        "label": spec.label,
        "columns": [c.describe() for c in spec.columns],
        "key_column": spec.key_column,
        "writable": spec.writable,
        "template": spec.template,
    }


async def get_defined(company_id: int, name: str) -> DefinedDataset:
    """A dataset `company_id` defined; 404 otherwise (another company's of the same name included)."""
    table = t.DatasetDefinition
    row = await table.select().where((table.company == company_id) & (table.name == name)).first()
    if row is None:
        raise NotFound(f"no dataset {name!r} defined in this company", code="unknown_dataset")
    return DefinedDataset.from_row(row)


# ---------------------------------------------------------------------------------------------------------
# Rows in bulk: imports and syncs


@dataclass(frozen=True)
class RowDefaults:
    """Ownership for rows that do not say it themselves (no `owner_email` / `team` / `visibility` key)."""

    owner_id: int  # a person of the dataset's company
    team_id: int | None = None  # a team of the dataset's company
    visibility: str = "company"  # private | team | company


@dataclass(frozen=True)
class Refusal:
    row: int  # the row's number as the caller counts (first_row + its index)
    reason: str


@dataclass
class UpsertResult:
    added: int = 0
    changed: int = 0
    unchanged: int = 0
    refused: list[Refusal] = field(default_factory=list)

    def add(self, other: UpsertResult) -> None:
        self.added += other.added
        self.changed += other.changed
        self.unchanged += other.unchanged
        self.refused.extend(other.refused)


@dataclass(frozen=True, slots=True)
class _Prepared:
    number: int  # the row's number, as the caller counts
    key: str
    # what the row itself says of its ownership; None: it says nothing (no such column, or an empty cell), so
    # a stored row keeps its own and a new row gets the import's default (`_owned`)
    owner: int | None
    team: int | None
    visibility: str | None
    values: dict[str, Any]  # JSON-ready, keys sorted


class Directory:
    """A company's people (by lowercased e-mail) and teams (by name), read once per import or sync."""

    def __init__(self, company_id: int, people: dict[str, int], teams: dict[str, int]) -> None:
        self.company_id = company_id
        self.people = people
        self.teams = teams
        self.ids = set(people.values())
        self.team_ids = set(teams.values())

    @classmethod
    async def load(cls, company_id: int) -> Directory:
        people = await User.select(User.id, User.email).where(User.company == company_id)
        teams = await Team.select(Team.id, Team.name).where(Team.company == company_id)
        return cls(
            company_id,
            {p["email"].strip().lower(): p["id"] for p in people},
            {tm["name"]: tm["id"] for tm in teams},
        )


BATCH = 5000  # rows looked up (and written) at once on PostgreSQL
SQLITE_BATCH = 2000  # SQLite: rows looked up at once (each key a parameter)
SQLITE_WRITE = 300  # SQLite: 10 parameters a row, at most 32,766 a statement


class _Plan:
    """How the rows of one upsert are read: each column's check chosen once (`values.json_coercer`, exactly
    `coerce_value` + `to_json`), in the order of the stored JSON's sorted keys."""

    def __init__(self, dataset: DefinedDataset, from_text: bool) -> None:
        self.key_column = dataset.key_column
        self.columns = sorted(
            ((c.name, json_coercer(c, from_text=from_text)) for c in dataset.columns), key=lambda c: c[0]
        )
        self.allowed = frozenset({c.name for c in dataset.columns} | {OWNER_EMAIL, TEAM, VISIBILITY})


def _prepare(plan: _Plan, row: Mapping[str, Any], people: Directory, number: int) -> _Prepared:
    if not plan.allowed.issuperset(row):
        unknown = [k for k in row if k not in plan.allowed]
        raise ValueProblem(f"unknown columns {sorted(unknown)}")
    get = row.get
    values = {name: coerce(get(name)) for name, coerce in plan.columns}
    key = values[plan.key_column]
    key = "" if key is None else str(key)
    if not key:
        raise ValueProblem(f"the key column {plan.key_column} is empty")
    if len(key) > KEY_MAX:
        raise ValueProblem(f"the key {plan.key_column} is longer than {KEY_MAX} characters")
    owner = team = visibility = None
    email = get(OWNER_EMAIL)
    if email is not None and email != "":
        owner = people.people.get(str(email).strip().lower())
        if owner is None:
            raise ValueProblem(f"owner_email {email!r} is not a person of this company")
    team_name = get(TEAM)
    if team_name is not None and team_name != "":
        team = people.teams.get(str(team_name).strip())
        if team is None:
            raise ValueProblem(f"team {team_name!r} is not a team of this company")
    seen = get(VISIBILITY)
    if seen is not None and seen != "":
        visibility = str(seen).strip().lower()
        if visibility not in VISIBILITIES:
            raise ValueProblem(f"visibility must be one of {list(VISIBILITIES)}")
    return _Prepared(number, key, owner, team, visibility, values)


def _owned(
    prepared: _Prepared, old: Mapping[str, Any] | None, defaults: RowDefaults
) -> tuple[int, int | None, str]:
    """The row's owner, team and visibility: each as the row says it, else as the stored row has it (a
    re-import without an `owner_email` column takes no one's rows), else the import's default (a new row)."""
    if old is None:
        owner, team, visibility = defaults.owner_id, defaults.team_id, defaults.visibility
    else:
        owner, team, visibility = old["owner"], old["team"], old["visibility"]
    if prepared.owner is not None:
        owner = prepared.owner
    if prepared.team is not None:
        team = prepared.team
    if prepared.visibility is not None:
        visibility = prepared.visibility
    # a stored team row whose team was deleted is its owner's alone (records/visibility.py): a re-import that says
    # nothing of its team or visibility keeps it so; a row that asks for team visibility must name a team
    asks = old is None or prepared.team is not None or prepared.visibility is not None
    if visibility == "team" and team is None and asks:
        raise ValueProblem("a team row needs a team (a `team` value, or the import's default team)")
    return owner, team, visibility


def check_defaults(defaults: RowDefaults, people: Directory) -> None:
    if defaults.owner_id not in people.ids:
        raise Invalid("the default owner is not a person of the dataset's company", code="invalid_defaults")
    if defaults.team_id is not None and defaults.team_id not in people.team_ids:
        raise Invalid("the default team is not a team of the dataset's company", code="invalid_defaults")
    if defaults.visibility not in VISIBILITIES:
        raise Invalid(f"the default visibility must be one of {list(VISIBILITIES)}", code="invalid_defaults")


def _postgres() -> bool:
    return isinstance(t.DatasetRow._meta.db, PostgresEngine)


async def _run(sql: str, *args: Any) -> list[dict[str, Any]]:
    return cast(list[dict[str, Any]], await t.DatasetRow._meta.db.run_querystring(QueryString(sql, *args)))


_STORED = '"external_key", "owner", "team", "visibility", "values"'
# PostgreSQL: the stored rows of a chunk's keys (a dataset's id, then the keys); one descent of
# `dataset_row_dataset_key` per key once the planner knows the dataset (`refresh_statistics`)
EXISTING_SQL = (
    f'SELECT {_STORED} FROM "dataset_row" WHERE "dataset" = {{}} AND "external_key" = ANY({{}}::text[])'
)


async def _existing(dataset: DefinedDataset, keys: list[str]) -> dict[str, dict[str, Any]]:
    if not keys:
        return {}
    cols = _STORED
    if _postgres():
        rows = []
        for i in range(0, len(keys), BATCH):
            rows += await _run(
                EXISTING_SQL,
                dataset.id,
                keys[i : i + BATCH],
            )
    else:
        rows = []
        for i in range(0, len(keys), SQLITE_BATCH):
            part = keys[i : i + SQLITE_BATCH]
            marks = ", ".join("{}" for _ in part)
            rows += await _run(
                f'SELECT {cols} FROM "dataset_row" WHERE "dataset" = {{}} AND "external_key" IN ({marks})',
                dataset.id,
                *part,
            )
    out = {}
    for r in rows:
        values = r["values"]
        out[r["external_key"]] = {**r, "values": json.loads(values) if isinstance(values, str) else values}
    return out


_UPSERT_TAIL = """
ON CONFLICT ("dataset", "external_key") DO UPDATE SET "owner" = excluded."owner", "team" = excluded."team",
  "visibility" = excluded."visibility", "values" = excluded."values", "updated_at" = excluded."updated_at",
  "version" = "dataset_row"."version" + 1"""
_COLUMNS = (
    '"company", "dataset", "external_key", "owner", "team", "visibility", "values", "created_at", '
    '"updated_at", "version"'
)
_COPY_COLUMNS = [
    "company", "dataset", "external_key", "owner", "team", "visibility", "values", "created_at", "updated_at",
    "version",
]  # fmt: skip


async def claim_empty(dataset: DefinedDataset) -> bool:
    """PostgreSQL, inside the caller's transaction: whether `dataset` has no rows, holding it so until the
    transaction ends. The dataset's definition is locked FOR UPDATE, which every other statement writing a
    row of it waits for (the per-statement reference check locks it FOR KEY SHARE, `tables.REFERENCE_CHECKS`),
    so rows found missing now stay missing: the caller may count every row it writes as added, without
    looking any up, and COPY them in (`write_rows(fresh=True)`). False on SQLite (no such claim is made)."""
    if not _postgres():
        return False
    if not await _run('SELECT 1 FROM "dataset_definition" WHERE "id" = {} FOR UPDATE', dataset.id):
        return False
    # a statement of its own: its snapshot is taken after the lock, so it sees what a writer we waited for wrote
    rows = await _run('SELECT 1 FROM "dataset_row" WHERE "dataset" = {} LIMIT 1', dataset.id)
    return not rows


# PostgreSQL: after an import or a sync that added at least this many rows, the planner's statistics of
# `dataset_row` are checked (`refresh_statistics`). Below it, the worst plan a stale estimate can give a later
# lookup (a scan of the whole dataset per chunk of keys) reads fewer rows than two chunks: not worth an ANALYZE.
ANALYZE_AFTER_ADDED = 2 * BATCH
# the columns the lookups by key, the visibility rule and the export filter or order on (not `values`: its
# statistics serve no plan of ours and cost the most to gather)
_ANALYZED = '"dataset", "external_key", "company", "owner", "team", "visibility", "id"'


async def refresh_statistics(dataset: DefinedDataset, added: int) -> bool:
    """PostgreSQL, after an import or a sync of `dataset` committed having added `added` rows: ANALYZE
    `dataset_row` when the planner believes the dataset holds fewer than half of them. Whether it was run.

    Why (docs/imports.md, "The incremental sync after a first sync"): a large first import or sync leaves the
    table without statistics for the dataset until autovacuum gets to it (a minute or more; never, for a dataset
    under a tenth of a large table). The next import's or sync's lookup of stored rows by key
    (`_existing`: `dataset = $1 AND external_key = ANY($2)`) was then planned as a scan of every row of the
    dataset (`dataset_row_visible` on `dataset = $1`, the keys as a filter), the dataset believed to be a few
    thousand rows: 52,000 pages read per chunk of 5,000 keys at 1,000,000 rows. With the statistics, each
    key is one descent of `dataset_row_dataset_key`. Statistics are advice to the planner only: a failure here
    (no permission, a lock not granted in time) is logged, never the import's."""
    if not _postgres() or added < ANALYZE_AFTER_ADDED:
        return False
    try:
        rows = await _run(
            f'EXPLAIN (FORMAT JSON) SELECT 1 FROM "dataset_row" WHERE "dataset" = {int(dataset.id)}'
        )
        explained = rows[0]["QUERY PLAN"]
        plan = json.loads(explained) if isinstance(explained, str) else explained
        if plan[0]["Plan"]["Plan Rows"] * 2 >= added:  # the planner knows the dataset well enough
            return False
        await _run(f'ANALYZE "dataset_row" ({_ANALYZED})')
    except Exception as exc:  # the rows are committed; only the planner's advice is missing
        log.warning(
            "statistics of dataset_row not refreshed after dataset %s: %s", dataset.id, type(exc).__name__
        )
        return False
    return True


def _json_text(values: dict[str, Any]) -> str:
    """A row's values as JSON text (orjson: a tenth of `json.dumps`'s time; an integer past 64 bits, which it
    refuses, goes through `json.dumps`)."""
    try:
        return orjson.dumps(values).decode()
    except orjson.JSONEncodeError:
        return json.dumps(values)


# PostgreSQL: a chunk's rows are COPYed into this temporary table of the transaction, then upserted from it by
# one INSERT … ON CONFLICT (docs/imports.md). The API's role may make temporary tables (fleet/queue.py keeps
# TEMP for it when it takes it from PUBLIC); where a role may not, the rows go as arrays (`unnest`) instead.
_STAGE = "cleanroom_rows_in"
_STAGE_MAKE = (
    f'CREATE TEMPORARY TABLE IF NOT EXISTS "{_STAGE}" '
    "(k text, o integer, tm integer, v text, j jsonb) ON COMMIT DROP; "
    f'TRUNCATE "{_STAGE}"'
)
_may_stage: dict[str, bool] = {}  # per database: may this role make temporary tables


async def _stage_allowed(connection: Any) -> bool:
    # only reached under `if _postgres()` (its one caller): the engine is a PostgresEngine
    database = repr(sorted(cast(PostgresEngine, t.DatasetRow._meta.db).config.items()))
    if database not in _may_stage:
        _may_stage[database] = bool(
            await connection.fetchval("SELECT has_database_privilege(current_database(), 'TEMPORARY')")
        )
    return _may_stage[database]


_Write = tuple[str, int, "int | None", str, str]  # key, owner, team, visibility, values as JSON text


async def write_rows(dataset: DefinedDataset, rows: list[_Write], *, fresh: bool = False) -> None:
    """Write the rows `settle_rows` returned (no transaction of its own; on PostgreSQL, one is opened for the
    statements of this call when the caller holds none). `fresh`: they are new rows of a dataset the caller's
    transaction holds empty (`claim_empty`), COPYed straight into the table."""
    now = clock.now()
    if _postgres():
        async with t.DatasetRow._meta.db.transaction() as transaction:  # the caller's, when it holds one
            connection = transaction.connection
            if fresh:
                await connection.copy_records_to_table(
                    "dataset_row",
                    records=[
                        (dataset.company_id, dataset.id, key, owner, team, visibility, values, now, now, 1)
                        for key, owner, team, visibility, values in rows
                    ],
                    columns=_COPY_COLUMNS,
                )
                return
            staged = await _stage_allowed(connection)
            for i in range(0, len(rows), BATCH):
                await _write_postgres(connection, dataset, rows[i : i + BATCH], now, staged)
        return
    for i in range(0, len(rows), SQLITE_WRITE):
        part = rows[i : i + SQLITE_WRITE]
        marks = ", ".join("({}, {}, {}, {}, {}, {}, {}, {}, {}, 1)" for _ in part)
        args: list[Any] = []
        for key, owner, team, visibility, values in part:
            args += [dataset.company_id, dataset.id, key, owner, team, visibility, values, now, now]
        await _run(f'INSERT INTO "dataset_row" ({_COLUMNS}) VALUES {marks}{_UPSERT_TAIL}', *args)


async def _write_postgres(
    connection: Any, dataset: DefinedDataset, rows: list[_Write], now: Any, staged: bool
) -> None:
    if staged:  # COPY into the transaction's temporary table, then one INSERT … ON CONFLICT from it
        await connection.execute(_STAGE_MAKE)
        await connection.copy_records_to_table(_STAGE, records=rows, columns=["k", "o", "tm", "v", "j"])
        await connection.execute(
            f'INSERT INTO "dataset_row" ({_COLUMNS}) SELECT $1, $2, k, o, tm, v, j, $3, $3, 1 '
            f'FROM "{_STAGE}"{_UPSERT_TAIL}',
            dataset.company_id,
            dataset.id,
            now,
        )
        return
    keys, owners, teams, visibilities, values = (list(c) for c in zip(*rows, strict=True))
    await connection.execute(
        f'INSERT INTO "dataset_row" ({_COLUMNS}) SELECT $1, $2, u.k, u.o, u.tm, u.v, CAST(u.j AS JSONB), '
        "$3, $3, 1 FROM unnest($4::text[], $5::integer[], $6::integer[], $7::text[], $8::text[]) "
        f"AS u(k, o, tm, v, j){_UPSERT_TAIL}",
        dataset.company_id,
        dataset.id,
        now,
        keys,
        owners,
        teams,
        visibilities,
        values,
    )


@dataclass
class Prepared:
    """A chunk's rows checked (`prepare_rows`: no database, so a caller may run it in a thread while the
    previous chunk is written), by key, and the rows refused on the way."""

    rows: dict[str, _Prepared] = field(default_factory=dict)
    refused: list[Refusal] = field(default_factory=list)


def row_plan(dataset: DefinedDataset, *, from_text: bool) -> _Plan:
    return _Plan(dataset, from_text)


def prepare_rows(
    plan: _Plan, rows: Sequence[Mapping[str, Any]], people: Directory, first_row: int
) -> Prepared:
    """Each row's values checked and its ownership read; a row refused (with its number and why) or kept by
    its key. A key the chunk repeats is refused the second time."""
    out = Prepared()
    kept, refused = out.rows, out.refused
    for index, row in enumerate(rows):
        number = first_row + index
        try:
            prepared = _prepare(plan, row, people, number)
        except ValueProblem as exc:
            refused.append(Refusal(number, str(exc)))
            continue
        first = kept.get(prepared.key)
        if first is not None:
            refused.append(
                Refusal(number, f"key {prepared.key!r} appears again (first at row {first.number})")
            )
            continue
        kept[prepared.key] = prepared
    return out


HIDDEN_ROW = "a row with this key exists that you may not see, so you may not change it"


async def _hidden_keys(reader: UserContext, dataset: DefinedDataset, keys: list[str]) -> set[str]:
    """The stored `keys` whose rows `reader` may not see, by the one visibility rule (`visible_where`)."""
    if reader.is_admin or not keys:
        return set()
    seen: set[str] = set()
    for i in range(0, len(keys), SQLITE_BATCH):
        part = keys[i : i + SQLITE_BATCH]
        rows = await t.DatasetRow.select(t.DatasetRow.external_key).where(
            And(visible_where(reader, dataset), t.DatasetRow.external_key.is_in(part))
        )
        seen.update(r["external_key"] for r in rows)
    return set(keys) - seen


async def settle_rows(
    dataset: DefinedDataset,
    prepared: Prepared,
    defaults: RowDefaults,
    result: UpsertResult,
    reader: UserContext | None = None,
    *,
    fresh: bool = False,
) -> list[_Write]:
    """Counts `prepared` into `result` against the stored rows (added, changed, unchanged, refused) and
    returns the rows to write (`write_rows`): the added and the changed, with their ownership settled.

    `reader`: the person importing. A stored row they may not see is refused (`HIDDEN_ROW`), neither compared
    nor written: a member with edit on the dataset must not overwrite another's private row, nor learn from
    "changed" or "unchanged" whether a guessed value is the one stored. (That the key exists at all, a unique
    key says to anyone who adds it.) None: a company's own sync, which writes every row.

    `fresh`: the caller's transaction holds the dataset empty (`claim_empty`): no stored row to look up, so
    none hidden, every row added."""
    existing = {} if fresh else await _existing(dataset, list(prepared.rows))
    hidden = await _hidden_keys(reader, dataset, list(existing)) if reader is not None else set()
    writes: list[_Write] = []
    refused = list(prepared.refused)
    for key, row in prepared.rows.items():
        old = existing.get(key)
        if key in hidden:
            refused.append(Refusal(row.number, HIDDEN_ROW))
            continue
        try:
            owner, team, visibility = _owned(row, old, defaults)
        except ValueProblem as exc:
            refused.append(Refusal(row.number, str(exc)))
            continue
        if old is None:
            result.added += 1
        elif (old["owner"], old["team"], old["visibility"], old["values"]) == (
            owner,
            team,
            visibility,
            row.values,
        ):
            result.unchanged += 1
            continue
        else:
            result.changed += 1
        writes.append((key, owner, team, visibility, _json_text(row.values)))
    refused.sort(key=lambda refusal: refusal.row)  # a missing team is found here, after the values' checks
    result.refused.extend(refused)
    return writes


async def upsert_rows(
    dataset: DefinedDataset,
    rows: Sequence[Mapping[str, Any]],
    defaults: RowDefaults,
    *,
    from_text: bool = True,
    first_row: int = 1,
    dry_run: bool = False,
    directory: Directory | None = None,
    reader: UserContext | None = None,
) -> UpsertResult:
    """Add or change `dataset`'s rows by their key column; say what was added, changed, left unchanged and
    refused (each refusal with its row number, `first_row` + index, and why). A refused row is not written;
    the others are, unless `dry_run`. A row whose values and ownership equal the stored ones is unchanged (its
    version stays); a changed row's version goes up by one, so a proposed change staged before it conflicts.

    `rows`: mappings of column name → value (text from a file with `from_text`, else typed values), plus
    optional `owner_email`, `team` (a team's name) and `visibility`. What a row does not say of its ownership
    (no such key, or empty) a stored row keeps as it is — re-importing a file takes no one's rows — and a new
    row takes from `defaults`. No transaction of its own: wrap the whole import in one for all-or-nothing.
    `directory`: the company's people and teams, read once per import (`Directory.load`) when the caller calls
    this per chunk. (`importing.Loader` runs the same three steps, `prepare_rows`, `settle_rows` and
    `write_rows`, overlapping a chunk's checks with the previous chunk's write.)"""
    people = directory or await Directory.load(dataset.company_id)
    check_defaults(defaults, people)
    plan = _Plan(dataset, from_text)
    prepared = prepare_rows(plan, rows, people, first_row)
    result = UpsertResult()
    writes = await settle_rows(dataset, prepared, defaults, result, reader)
    if writes and not dry_run:
        await write_rows(dataset, writes)
    return result


async def delete_rows(dataset: DefinedDataset, keys: Sequence[str]) -> int:
    """Delete `dataset`'s rows with these keys (a key with no row is skipped); how many were deleted. No
    transaction of its own, as `upsert_rows`."""
    deleted = 0
    unique = list(dict.fromkeys(str(k) for k in keys))
    for i in range(0, len(unique), BATCH if _postgres() else 500):
        part = unique[i : i + (BATCH if _postgres() else 500)]
        if _postgres():
            rows = await _run(
                'DELETE FROM "dataset_row" WHERE "dataset" = {} AND "external_key" = ANY({}::text[]) RETURNING "id"',
                dataset.id,
                part,
            )
        else:
            marks = ", ".join("{}" for _ in part)
            rows = await _run(
                f'DELETE FROM "dataset_row" WHERE "dataset" = {{}} AND "external_key" IN ({marks}) RETURNING "id"',
                dataset.id,
                *part,
            )
        deleted += len(rows)
    return deleted


async def row_count(dataset: DefinedDataset) -> int:
    return cast(int, await t.DatasetRow.count().where(t.DatasetRow.dataset == dataset.id))
