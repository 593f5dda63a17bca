"""Dataset definitions: the company's own datasets (admins define them; issue 54) and the built-ins offered as
templates. Defining and changing are a person's decisions (no token: the default scope rule), admin-only and
audited, in records/defined.py."""

from __future__ import annotations

from litestar import Controller, get, post, put
from litestar.di import Provide

from backend.records import defined
from backend.records.datasets import DATASETS, AnyDataset
from backend.records.schemas import ColumnDefinition, DatasetBody, DatasetDefinitionInfo
from backend.records.values import ColumnSpec
from backend.records.visibility import company_datasets
from backend.tenancy.auth import provide_user
from backend.tenancy.context import UserContext


def definition_info(dataset: AnyDataset, rows: int | None = None) -> DatasetDefinitionInfo:
    return DatasetDefinitionInfo(
        name=dataset.name,
        label=dataset.label,
        origin="builtin" if dataset.builtin else "company",
        columns=[ColumnDefinition(**spec.describe()) for spec in dataset.specs],
        key_column=None if dataset.builtin else dataset.key_column,  # type: ignore[union-attr]
        writable=dataset.writable_fields,
        template=None if dataset.builtin else (dataset.template or None),  # type: ignore[union-attr]
        version=1 if dataset.builtin else dataset.version,  # type: ignore[union-attr]
        rows=rows,
    )


def spec_of(body: DatasetBody, name: str | None = None) -> defined.DatasetSpec:
    name = name or body.name
    if body.template and not body.columns:
        spec = defined.spec_from_template(body.template, name, body.label, body.key_column)
        if body.writable is not None:
            spec.writable = body.writable
        return spec
    columns = [
        ColumnSpec(c.name, c.kind, c.nullable, c.max_length, tuple(c.enum) if c.enum else None)
        for c in body.columns
    ]
    return defined.DatasetSpec(name, body.label, columns, body.key_column, body.writable, body.template or "")


class DatasetsController(Controller):
    path = "/api/datasets"
    tags = ["datasets"]
    dependencies = {"user": Provide(provide_user)}

    @get("/")
    async def list_definitions(self, user: UserContext) -> list[DatasetDefinitionInfo]:
        """The company's own datasets' definitions (row counts for admins only)."""
        out = []
        for dataset in await company_datasets(user.company_id):
            if dataset.builtin:
                continue
            rows = await defined.row_count(dataset) if user.is_admin else None  # type: ignore[arg-type]
            out.append(definition_info(dataset, rows))
        return out

    @get("/templates")
    async def templates(self, user: UserContext) -> list[DatasetDefinitionInfo]:
        """The twelve built-in datasets, as templates a company-defined dataset may start from."""
        return [definition_info(d) for d in DATASETS.values()]

    @get("/{name:str}")
    async def get_definition(self, user: UserContext, name: str) -> DatasetDefinitionInfo:
        dataset = await defined.get_defined(user.company_id, name)
        return definition_info(dataset, await defined.row_count(dataset) if user.is_admin else None)

    @post("/", status_code=201)
    async def define(self, user: UserContext, data: DatasetBody) -> DatasetDefinitionInfo:
        """A company admin defines a dataset (403 for anyone else, a token included); audited."""
        return definition_info(await defined.define_dataset(user, spec_of(data)), 0)

    @put("/{name:str}")
    async def update(self, user: UserContext, name: str, data: DatasetBody) -> DatasetDefinitionInfo:
        """A company admin changes a dataset's definition (its name stays); audited."""
        dataset = await defined.update_dataset(user, name, spec_of(data, name))
        return definition_info(dataset, await defined.row_count(dataset))
