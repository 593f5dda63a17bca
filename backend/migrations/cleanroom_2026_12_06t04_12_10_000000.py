"""A worker host's capacity is the operator's, set when its enrollment token is made (security review
2026-12-06, D-L3): a host registering says how many VMs it runs, and the API believes no more than this.
Written by hand: one column. Tokens made before it have none: their hosts are held to the API's
`max_concurrent_vms` (what `cleanroom worker` offered by default)."""

from piccolo.columns.column_types import Integer

from backend.migrations._columns import add_columns, params

ID = "2026-12-06T04:12:10:000000"
VERSION = "1.38.0"
DESCRIPTION = "a worker token's capacity, set by the operator at enrollment"


async def forwards():
    return add_columns(ID, DESCRIPTION, [("WorkerToken", "worker_token", "capacity", Integer, params(None, null=True))])
