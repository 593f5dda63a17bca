"""OAuth 2.1 for remote assistants (`tenancy.oauth_tables`, issue 58): a frozen copy of the tables as they were
when this was written, created with the engine's own DDL."""

from piccolo.apps.migrations.auto.migration_manager import MigrationManager
from piccolo.columns import JSON, Boolean, ForeignKey, Timestamptz, Varchar
from piccolo.engine.finder import engine_finder
from piccolo.table import Table


class User(Table, tablename="app_user"):
    pass


ID = "2026-12-06T09:33:00:000000"
VERSION = "1.38.0"
DESCRIPTION = "oauth_client, oauth_request, oauth_grant, oauth_token: OAuth 2.1 for the remote MCP endpoint"


class OAuthClient(Table, tablename="oauth_client"):
    client_id = Varchar(length=64, unique=True, index=True)
    client_name = Varchar(length=200, default="")
    info = JSON(default={})
    created_at = Timestamptz()


class OAuthRequest(Table, tablename="oauth_request"):
    request_hash = Varchar(length=64, unique=True, index=True)
    client_id = Varchar(length=64)
    params = JSON(default={})
    created_at = Timestamptz()
    expires_at = Timestamptz()
    used_at = Timestamptz(null=True, default=None)


class OAuthGrant(Table, tablename="oauth_grant"):
    user = ForeignKey(references=User, null=False, index=True)
    client_id = Varchar(length=64)
    client_name = Varchar(length=200, default="")
    redirect_uri = Varchar(length=2000, default="")
    scope = Varchar(length=20, default="assistant")
    resource = Varchar(length=2000, default="")
    created_at = Timestamptz()
    last_used_at = Timestamptz(null=True, default=None)
    revoked = Boolean(default=False)
    revoked_at = Timestamptz(null=True, default=None)


class OAuthToken(Table, tablename="oauth_token"):
    grant = ForeignKey(references=OAuthGrant, null=False, index=True)
    kind = Varchar(length=10)
    token_hash = Varchar(length=64, unique=True, index=True)
    data = JSON(default={})
    created_at = Timestamptz()
    expires_at = Timestamptz()
    used_at = Timestamptz(null=True, default=None)


async def _create() -> None:
    engine = engine_finder()
    assert engine is not None
    for table in (User, OAuthClient, OAuthRequest, OAuthGrant, OAuthToken):
        table._meta.db = engine  # the database being migrated, not the one found when this module loaded
    for table in (OAuthClient, OAuthRequest, OAuthGrant, OAuthToken):
        await table.create_table(if_not_exists=True)


async def forwards():
    manager = MigrationManager(migration_id=ID, app_name="cleanroom", description=DESCRIPTION)
    manager.add_raw(_create)
    return manager
