from __future__ import annotations

from litestar import Controller, Request, get
from litestar.di import Provide
from litestar.params import Parameter

from backend.records import service
from backend.records.datasets import AnyDataset
from backend.records.schemas import DatasetInfo, Record, RecordPage
from backend.records.visibility import company_datasets
from backend.tenancy.auth import ASSISTANT_OK, provide_user
from backend.tenancy.context import UserContext

RESERVED = {"page", "page_size", "sort"}


def dataset_info(user: UserContext, d: AnyDataset) -> DatasetInfo:
    return DatasetInfo(
        name=d.name,
        label=d.label,
        access=user.access(d.name),
        fields=d.export_columns,
        types=d.export_types,
        origin="builtin" if d.builtin else "company",
        key_column=None if d.builtin else d.key_column,  # type: ignore[union-attr]
        writable=d.writable_fields,
        enums={k: list(v) for k, v in d.enums.items()},
    )


class RecordsController(Controller):
    path = "/api/records"
    tags = ["records"]
    dependencies = {"user": Provide(provide_user)}
    opt = ASSISTANT_OK  # reading and uploading: open to the assistant's token

    @get("/")
    async def datasets(self, user: UserContext) -> list[DatasetInfo]:
        """The twelve built-ins, then the datasets the caller's company defined, each with its fields, their
        kinds and the caller's access."""
        return [dataset_info(user, d) for d in await company_datasets(user.company_id)]

    @get("/{dataset:str}")
    async def list_records(
        self,
        request: Request,
        user: UserContext,
        dataset: str,
        page: int = Parameter(default=1, ge=1),
        page_size: int = Parameter(default=50, ge=1, le=service.MAX_PAGE_SIZE),
        sort: str = Parameter(default="id", description="a field name, prefixed with '-' for descending"),
    ) -> RecordPage:
        """Other query parameters are exact-match filters, e.g. `?stage=won&owner_id=3`."""
        filters = {k: v for k, v in request.query_params.items() if k not in RESERVED}
        result = await service.list_records(
            user, dataset, page=page, page_size=page_size, sort=sort, filters=filters
        )
        return RecordPage(
            dataset=result.dataset,
            items=result.items,
            total=result.total,
            page=result.page,
            page_size=result.page_size,
        )

    @get("/{dataset:str}/{record_id:int}")
    async def get_record(self, user: UserContext, dataset: str, record_id: int) -> Record:
        return await service.get_record(user, dataset, record_id)
