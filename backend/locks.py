"""The API's own locks on PostgreSQL, in tables only the API's role can see (issue 52, D-M1).

Advisory locks were numbers any role of the cluster could take: a worker host's role, which reaches nothing
of the product, could hold the audit chain's key and stop every audited write, or the leader's and stop every
dispatch. A key made secret per deployment would not help: `pg_locks`, readable by every role, lists the keys
held (a held key would be learnt the first time it was seen). These locks are on tables instead; locking a
table, or a row of it, needs a privilege on it, which no worker role has (`fleet.queue.make_worker_role`
grants procrastinate's objects only, and `cleanroom worker` refuses a role that reaches anything else).

- `ApiLock` holds one row per short lock, taken `FOR UPDATE` inside the transaction it serialises and
  released at its commit: `chain` (every audit append), `schema` (procrastinate's schema applied once). A
  run's charges insert a row `charge:<run>` and delete it again in their transaction: a second charge of the
  run inserting it waits on the unique index until the first ends (`credits._lock_charge_of`).
- `ApiLeader` has no rows: the fleet's dispatching API process holds the table locked (`EXCLUSIVE`) in a
  transaction kept open on a connection of its own for as long as it leads. A table lock gives the
  transaction no transaction id and its idle session no snapshot, so holding it for days holds back no
  vacuum (a row lock would: it writes the row).

SQLite needs none of this (its write transaction holds the database's lock); the tables exist there too, as
every table does, and stay unused.
"""

from __future__ import annotations

from piccolo.columns import Varchar
from piccolo.table import Table

CHAIN = "chain"
SCHEMA = "schema"
NAMES = (CHAIN, SCHEMA)  # the rows the migration writes


class ApiLock(Table, tablename="api_lock"):
    name = Varchar(length=40, unique=True)


class ApiLeader(Table, tablename="api_leader"):
    """Never holds a row: only locked."""


TABLES = [ApiLock, ApiLeader]

# `{}`: the lock's name, as a bound parameter. The row comes back: a missing row would lock nothing.
ROW_LOCK = 'SELECT "name" FROM "api_lock" WHERE "name" = {} FOR UPDATE'
LEADER_LOCK = 'LOCK TABLE "api_leader" IN EXCLUSIVE MODE NOWAIT'


class MissingLock(RuntimeError):
    pass


def missing(name: str) -> MissingLock:
    return MissingLock(
        f"the lock row {name!r} of table api_lock is missing: the database's migrations have not all run"
    )
