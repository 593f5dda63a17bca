from __future__ import annotations

from typing import Annotated

from litestar import Controller, Response, get, post
from litestar.di import Provide
from litestar.enums import RequestEncodingType
from litestar.params import Body

from backend.drive import service
from backend.drive.schemas import DriveFileInfo, DriveFolderInfo, FolderBody, UploadForm
from backend.tenancy.auth import ASSISTANT_OK, provide_user
from backend.tenancy.context import UserContext


class DriveController(Controller):
    path = "/api/drive"
    tags = ["drive"]
    dependencies = {"user": Provide(provide_user)}
    opt = ASSISTANT_OK  # reading and uploading: open to the assistant's token

    @get("/folders")
    async def folders(self, user: UserContext, parent_id: int | None = None) -> list[DriveFolderInfo]:
        return [DriveFolderInfo(**f) for f in await service.list_folders(user, parent_id)]

    @post("/folders", status_code=201)
    async def create_folder(self, user: UserContext, data: FolderBody) -> DriveFolderInfo:
        return DriveFolderInfo(
            **await service.create_folder(
                user, data.name, parent_id=data.parent_id, visibility=data.visibility
            )
        )

    @get("/files")
    async def files(
        self, user: UserContext, folder_id: int | None = None, run_id: int | None = None, all: bool = False
    ) -> list[DriveFileInfo]:
        return [
            DriveFileInfo(**f)
            for f in await service.list_files(user, folder_id=folder_id, run_id=run_id, all_folders=all)
        ]

    @post("/files", status_code=201)
    async def upload(
        self,
        user: UserContext,
        data: Annotated[UploadForm, Body(media_type=RequestEncodingType.MULTI_PART)],
    ) -> DriveFileInfo:
        content = await data.file.read()
        return DriveFileInfo(
            **await service.upload(
                user, data.file.filename, content, folder_id=data.folder_id, visibility=data.visibility
            )
        )

    @get("/files/{file_id:int}")
    async def file(self, user: UserContext, file_id: int) -> DriveFileInfo:
        return DriveFileInfo(**service.file_payload(await service.get_file(user, file_id)))

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
