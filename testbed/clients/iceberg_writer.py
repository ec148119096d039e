#!/usr/bin/env python3
"""An Iceberg writer with PyIceberg's HiveCatalog (PyPI `pyiceberg[hive,pyarrow]`),
for the e2e test that two writers sharing a table through the proxy and
straight to the metastore never lose a commit.

    iceberg_writer.py write  URI WAREHOUSE DB TABLE WRITER APPENDS OUT
                             [--seconds S] [--retries N] [--get-table-req] [--lock-mutex FILE]
    iceberg_writer.py verify URI WAREHOUSE DB TABLE [--get-table-req]

write: loads a HiveCatalog (uri=thrift://..., warehouse=file:///...),
creates the namespace (with an explicit file:// location under WAREHOUSE)
and the table if missing, then appends APPENDS one-row batches (or for S
seconds), each with a unique marker WRITER-SEQ. An append that fails with
CommitFailedException (and only that) is retried on a refreshed table, up
to N times (PyIceberg itself retries a conflict 4 times inside each
append first). Every append that RETURNED SUCCESS is one JSON line in OUT,
flushed: {"marker", "snapshot_id", "ok": true, ...}; a failed one is a line
with "ok": false and the error, never counted as success. The last line of
OUT and of stdout is a summary.

verify: a fresh catalog (give it the metastore's own URI) loads the table,
scans every row and prints, as one JSON line, the markers present, the
rows, duplicated markers and the snapshots.

--get-table-req: HMS 4.0 has no get_table (only get_table_req), which
PyIceberg 0.12.0 calls for every table read, so table reads are redirected
to get_table_req (see patch_get_table_req).

--lock-mutex FILE: writers given the same FILE never have a lock and a
check_lock call in flight at once, which deadlocks HMS 4.0.1 on Derby (see
serialize_lock_calls).
"""
import argparse
import json
import os
import sys
import time
import traceback

import pyarrow as pa
from hive_metastore.ttypes import GetTableRequest, NoSuchObjectException
from pyiceberg.catalog import hive as pyhive
from pyiceberg.catalog.hive import HiveCatalog
from pyiceberg.exceptions import (
    CommitFailedException,
    NamespaceAlreadyExistsError,
    NoSuchTableError,
    TableAlreadyExistsError,
)
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField, StringType

SCHEMA = Schema(
    NestedField(1, "writer", StringType(), required=False),
    NestedField(2, "seq", LongType(), required=False),
    NestedField(3, "marker", StringType(), required=False),
)
ARROW_SCHEMA = pa.schema([("writer", pa.string()), ("seq", pa.int64()), ("marker", pa.string())])


def patch_get_table_req():
    """Make PyIceberg's table reads use get_table_req(GetTableRequest(db, tbl)).

    HMS 4.0.1 removed get_table (and get_table_objects_by_name): it answers
    "Invalid method name: 'get_table'". PyIceberg's unreleased PR #3924
    does the same as this patch (get_table_req in _get_hive_table); 0.12.0
    still calls get_table. The commit sequence is otherwise untouched:
    lock, check_lock, get_table_req, alter_table_with_environment_context,
    unlock. create_table (and register/rename) call open_client.get_table
    directly, so the client handed out by _HiveClient gets the same
    redirection.
    """

    def get_table_req(client, dbname, tbl_name):
        return client.get_table_req(GetTableRequest(dbName=dbname, tblName=tbl_name)).table

    def _get_hive_table(self, open_client, database_name, table_name):
        try:
            return get_table_req(open_client, database_name, table_name)
        except NoSuchObjectException as e:
            raise NoSuchTableError(f"Table does not exists: {table_name}") from e

    HiveCatalog._get_hive_table = _get_hive_table

    enter = pyhive._HiveClient.__enter__

    def __enter__(self):
        client = enter(self)
        client.get_table = lambda dbname, tbl_name: get_table_req(client, dbname, tbl_name)
        return client

    pyhive._HiveClient.__enter__ = __enter__


def serialize_lock_calls(path):
    """Let no two lock/check_lock calls of the writers sharing PATH be in
    flight at once (an flock on PATH around each call).

    A workaround for a deadlock of HMS 4.0.1 on Derby, the test bed's
    database, that happens without any proxy: check_lock runs in one
    transaction that first heartbeats the lock (UPDATE HIVE_LOCKS, a row
    lock) and then waits for the in-JVM mutex that stands in for SELECT ...
    FOR UPDATE on Derby (DatabaseProduct.lockInternal); a concurrent lock()
    holds that mutex while its CheckLockFunction query waits for the row
    lock. Derby cannot see the mutex, so lock() times out after
    derby.locks.waitTimeout (60 s) and SqlRetryHandler retries it 10 times
    without releasing the mutex: a 10-minute stall, after which the failed
    lock() leaves its WAITING lock behind to block the table. The metastore
    already runs these calls one at a time (the mutex); this only takes the
    turn before the heartbeat instead of after. The calls, their order
    and everything else are PyIceberg's own.
    """
    import fcntl

    def guarded(fn):
        def call(*args, **kwargs):
            with open(path, "a") as f:
                fcntl.flock(f, fcntl.LOCK_EX)
                try:
                    return fn(*args, **kwargs)
                finally:
                    fcntl.flock(f, fcntl.LOCK_UN)

        return call

    enter = pyhive._HiveClient.__enter__

    def __enter__(self):
        client = enter(self)
        client.lock = guarded(client.lock)
        client.check_lock = guarded(client.check_lock)
        return client

    pyhive._HiveClient.__enter__ = __enter__


def catalog(uri, warehouse):
    return HiveCatalog(
        "hmsproxy-e2e",
        uri=uri,
        warehouse="file://" + warehouse,
        # A commit waits for the other writer's table lock: poll check_lock
        # every 0.2 s, up to 150 times (30 s), not PyIceberg's default of
        # 4 polls 2, 4, 8 s apart (wait_exponential(multiplier=2) is never
        # under 2 s, so only the maximum matters).
        **{"lock-check-max-wait-time": "0.2", "lock-check-retries": "150"},
    )


class Counting:
    """Wraps the catalog's commit_table to count attempts and outcomes
    (PyIceberg's own retries inside an append included)."""

    def __init__(self, cat):
        self.calls = 0
        self.conflicts = 0  # CommitFailedException from commit_table
        self.errors = 0  # any other exception from commit_table
        self.kinds = {}  # first line of each CommitFailedException, counted
        inner = cat.commit_table

        def commit_table(*args, **kwargs):
            self.calls += 1
            try:
                return inner(*args, **kwargs)
            except CommitFailedException as e:
                self.conflicts += 1
                kind = str(e).split(":")[0][:80]
                self.kinds[kind] = self.kinds.get(kind, 0) + 1
                raise
            except Exception:
                self.errors += 1
                raise

        cat.commit_table = commit_table


def ensure_table(cat, warehouse, db, table):
    """Create the namespace and table unless they exist. The writers race
    to create them: the loser gets AlreadyExists, or on HMS 4.0 (Derby) a
    MetaException for the unique-key violation; either way, the other
    writer's namespace or table is then used."""
    ident = (db, table)
    try:
        cat.create_namespace(db, {"location": f"file://{warehouse}/{db}.db"})
    except NamespaceAlreadyExistsError:
        pass
    except Exception:
        cat.load_namespace_properties(db)  # raises unless the other writer made it
    try:
        return cat.load_table(ident), False
    except NoSuchTableError:
        pass
    try:
        return cat.create_table(ident, schema=SCHEMA), True
    except TableAlreadyExistsError:  # the other writer was first
        return cat.load_table(ident), False
    except Exception:
        try:
            return cat.load_table(ident), False
        except NoSuchTableError:
            pass
        raise


def write(a):
    cat = catalog(a.uri, a.warehouse)
    counts = Counting(cat)
    tbl, created = ensure_table(cat, a.warehouse, a.db, a.table)
    out = open(a.out, "a", buffering=1)
    begin = time.monotonic()
    summary = {"writer": a.writer, "created": created, "attempted": 0, "succeeded": 0,
               "retried": 0, "failed": 0}
    seq = 0
    while True:
        if a.seconds > 0:
            if time.monotonic() - begin >= a.seconds:
                break
        elif seq >= a.appends:
            break
        seq += 1
        marker = f"{a.writer}-{seq:05d}"
        batch = pa.Table.from_pylist([{"writer": a.writer, "seq": seq, "marker": marker}], schema=ARROW_SCHEMA)
        summary["attempted"] += 1
        calls0, conflicts0 = counts.calls, counts.conflicts
        retries = 0
        rec = None
        while True:
            try:
                tbl.append(batch)
            except CommitFailedException as e:
                if retries >= a.retries:
                    rec = {"marker": marker, "ok": False, "error": f"CommitFailedException: {e}", "retries": retries}
                    break
                retries += 1
                tbl.refresh()
                continue
            except Exception as e:  # unknown outcome: recorded, never a success
                rec = {"marker": marker, "ok": False, "error": f"{type(e).__name__}: {e}", "retries": retries,
                       "trace": traceback.format_exc(limit=4)}
                try:
                    tbl.refresh()
                except Exception:
                    pass
                break
            snap = tbl.metadata.current_snapshot()
            rec = {"marker": marker, "ok": True, "snapshot_id": snap.snapshot_id if snap else None,
                   "retries": retries}
            break
        rec["commit_calls"] = counts.calls - calls0
        rec["conflicts"] = counts.conflicts - conflicts0
        if rec["ok"]:
            summary["succeeded"] += 1
        else:
            summary["failed"] += 1
        if rec["conflicts"] > 0 or retries > 0:
            summary["retried"] += 1
        out.write(json.dumps(rec) + "\n")
        out.flush()
        os.fsync(out.fileno())
    summary.update(commit_calls=counts.calls, conflicts=counts.conflicts, commit_errors=counts.errors,
                   conflict_kinds=counts.kinds, seconds=round(time.monotonic() - begin, 1))
    line = json.dumps({"summary": summary})
    out.write(line + "\n")
    out.close()
    print(line)


def verify(a):
    cat = catalog(a.uri, a.warehouse)
    tbl = cat.load_table((a.db, a.table))
    markers = tbl.scan(selected_fields=("marker",)).to_arrow().column("marker").to_pylist()
    seen, dups = set(), set()
    for m in markers:
        (dups if m in seen else seen).add(m)
    print(json.dumps({
        "markers": sorted(seen),
        "rows": len(markers),
        "duplicates": sorted(dups),
        "snapshots": len(tbl.metadata.snapshots),
        "snapshot_ids": [s.snapshot_id for s in tbl.metadata.snapshots],
        "metadata_location": tbl.metadata_location,
    }))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="mode", required=True)
    w = sub.add_parser("write")
    v = sub.add_parser("verify")
    for s in (w, v):
        s.add_argument("uri")
        s.add_argument("warehouse", help="local directory (file:// warehouse)")
        s.add_argument("db")
        s.add_argument("table")
        s.add_argument("--get-table-req", action="store_true",
                       help="table reads with get_table_req (HMS 4.0 has no get_table)")
        s.add_argument("--lock-mutex", metavar="FILE",
                       help="no two lock/check_lock calls of writers sharing FILE at once (HMS 4.0 on Derby)")
    w.add_argument("writer")
    w.add_argument("appends", type=int)
    w.add_argument("out")
    w.add_argument("--seconds", type=float, default=0, help="append for this long instead of APPENDS times")
    w.add_argument("--retries", type=int, default=20, help="retries of one append after CommitFailedException")
    a = p.parse_args()
    a.warehouse = os.path.abspath(a.warehouse)
    if a.get_table_req:
        patch_get_table_req()
    if a.lock_mutex:
        serialize_lock_calls(a.lock_mutex)
    (write if a.mode == "write" else verify)(a)


if __name__ == "__main__":
    sys.exit(main())
