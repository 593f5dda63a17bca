from __future__ import annotations

import unicodedata
from typing import Annotated
from urllib.parse import quote

from litestar import Controller, Response, delete, get, patch, post
from litestar.datastructures import UploadFile
from litestar.di import Provide
from litestar.enums import RequestEncodingType
from litestar.params import Body
from pydantic import BaseModel, Field, field_validator

from backend.drive import service
from backend.drive.schemas import (
    DriveFileInfo,
    DriveFolderInfo,
    DriveQuota,
    FolderBody,
    VisibilityBody,
)
from backend.records.columns import VISIBILITIES
from backend.tenancy.auth import ASSISTANT_OK, TOKEN_SCOPES, provide_user
from backend.tenancy.context import UserContext

# sharing, deleting, restoring and purging a file are a person's decision: refused to the assistant's token
# (403 person_required, audited as every such refusal is), though the controller opens reading and uploading
PERSON_ONLY = {TOKEN_SCOPES: frozenset()}


class UploadForm(BaseModel):
    model_config = {"arbitrary_types_allowed": True}
    file: UploadFile
    folder_id: int | None = None
    visibility: str = Field(default="private", json_schema_extra={"enum": list(VISIBILITIES)})

    @field_validator("folder_id", mode="before")
    @classmethod
    def _no_folder(cls, value: object) -> object:
        """A form has no null: an empty field, or the word a client writes for one, is the top folder."""
        return None if value in ("", "null") else value


def content_disposition(name: str) -> str:
    """`attachment` naming the file twice: RFC 5987 `filename*` (UTF-8, percent-encoded) for every current
    browser, and an ASCII `filename` for the rest. Nothing of the name reaches the header unencoded but
    printable ASCII other than quotes and backslashes, so a name cannot end the value or the header."""
    plain = "".join(c for c in unicodedata.normalize("NFKD", name) if not unicodedata.combining(c))
    fallback = "".join(
        c if " " <= c <= "~" else "_" for c in plain if c not in '"\\' and unicodedata.category(c) != "Cc"
    ).strip()
    encoded = quote(name, safe="", errors="replace")
    return f"attachment; filename=\"{fallback or 'download'}\"; filename*=UTF-8''{encoded}"


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
        # the multipart parser spooled the part to a temporary file; it is copied on in chunks from there
        try:
            return DriveFileInfo(
                **await service.upload(
                    user,
                    data.file.filename,
                    data.file.file,
                    folder_id=data.folder_id,
                    visibility=data.visibility,
                )
            )
        finally:
            await data.file.close()

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
                "Content-Disposition": content_disposition(row["name"]),
                "X-Content-Type-Options": "nosniff",
            },
        )

    @patch("/files/{file_id:int}", opt=PERSON_ONLY)
    async def share(self, user: UserContext, file_id: int, data: VisibilityBody) -> DriveFileInfo:
        return DriveFileInfo(**await service.set_visibility(user, file_id, data.visibility))

    @delete("/files/{file_id:int}", status_code=200, opt=PERSON_ONLY)
    async def trash(self, user: UserContext, file_id: int) -> DriveFileInfo:
        """To the trash: restorable by its owner for 30 days, then purged."""
        return DriveFileInfo(**await service.trash(user, file_id))

    @get("/trash")
    async def trashed(self, user: UserContext) -> list[DriveFileInfo]:
        return [DriveFileInfo(**f) for f in await service.list_trash(user)]

    @post("/trash/{file_id:int}/restore", status_code=200, opt=PERSON_ONLY)
    async def restore(self, user: UserContext, file_id: int) -> DriveFileInfo:
        return DriveFileInfo(**await service.restore(user, file_id))

    @delete("/trash/{file_id:int}", status_code=204, opt=PERSON_ONLY)
    async def purge(self, user: UserContext, file_id: int) -> None:
        await service.purge(user, file_id)

    @get("/quota")
    async def quota(self, user: UserContext) -> DriveQuota:
        return DriveQuota(**await service.quota(user))
