from __future__ import annotations

from typing import Annotated, Any

from litestar import Controller, Response, get, post
from litestar.datastructures import UploadFile
from litestar.di import Provide
from litestar.enums import RequestEncodingType
from litestar.params import Body
from pydantic import BaseModel, Field

from backend.drive import service
from backend.tenancy.auth import ASSISTANT_OK, provide_user
from backend.tenancy.context import UserContext


class FolderBody(BaseModel):
    name: str = Field(min_length=1, max_length=200)
    parent_id: int | None = None
    visibility: str = "private"


class UploadForm(BaseModel):
    model_config = {"arbitrary_types_allowed": True}
    file: UploadFile
    folder_id: int | None = None
    visibility: str = "private"


class DriveController(Controller):
    path = "/api/drive"
    tags = ["drive"]
    dependencies = {"user": Provide(provide_user)}
    opt = ASSISTANT_OK  # reading and uploading: open to the assistant's token

    @get("/folders")
    async def folders(self, user: UserContext, parent_id: int | None = None) -> list[dict[str, Any]]:
        return await service.list_folders(user, parent_id)

    @post("/folders", status_code=201)
    async def create_folder(self, user: UserContext, data: FolderBody) -> dict[str, Any]:
        return await service.create_folder(
            user, data.name, parent_id=data.parent_id, visibility=data.visibility
        )

    @get("/files")
    async def files(
        self, user: UserContext, folder_id: int | None = None, run_id: int | None = None, all: bool = False
    ) -> list[dict[str, Any]]:
        return await service.list_files(user, folder_id=folder_id, run_id=run_id, all_folders=all)

    @post("/files", status_code=201)
    async def upload(
        self,
        user: UserContext,
        data: Annotated[UploadForm, Body(media_type=RequestEncodingType.MULTI_PART)],
    ) -> dict[str, Any]:
        content = await data.file.read()
        return await service.upload(
            user, data.file.filename, content, folder_id=data.folder_id, visibility=data.visibility
        )

    @get("/files/{file_id:int}")
    async def file(self, user: UserContext, file_id: int) -> dict[str, Any]:
        return service.file_payload(await service.get_file(user, file_id))

    @get("/files/{file_id:int}/content", media_type="application/octet-stream")
    async def content(self, user: UserContext, file_id: int) -> Response[bytes]:
        row, data = await service.read_file(user, file_id)
        media = {"image": "image/png", "pdf": "application/pdf", "csv": "text/csv", "text": "text/plain"}.get(
            row["kind"], "application/octet-stream"
        )
        if row["kind"] == "image" and not data.startswith(b"\x89PNG"):
            media = "image/jpeg" if data.startswith(b"\xff\xd8") else "application/octet-stream"
        return Response(
            data,
            media_type=media,
            headers={
                "Content-Disposition": 'attachment; filename="' + row["name"].replace('"', "'") + '"',
                "X-Content-Type-Options": "nosniff",
            },
        )
