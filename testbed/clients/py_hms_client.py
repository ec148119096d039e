#!/usr/bin/env python3
"""Raw Thrift HMS calls from Python (PyPI package `hmsclient`) against a real
metastore, checking every answer.

    py_hms_client.py thrift://127.0.0.1:9083 [--db NAME] [--keep]
                     [--check-spark-table DB.TABLE]

Creates its own database and partitioned table, exercises the common read
calls, alters, drops. Exits non-zero on the first mismatch. One-line summary
on stdout.
"""
import argparse
import copy
import getpass
import sys
import time
from urllib.parse import urlparse

from thrift.Thrift import TApplicationException
from hmsclient import hmsclient
from hmsclient.genthrift.hive_metastore import ttypes as T

CALLS = []
FALLBACKS = []  # legacy methods the server refused, answered by a newer form


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def call(cli, name, *args):
    CALLS.append(name)
    return getattr(cli, name)(*args)


def get_table(cli, db, name):
    """get_table, or get_table_req where the server dropped the legacy call
    (Hive 4.0.1 answers UNKNOWN_METHOD to get_table)."""
    try:
        return call(cli, "get_table", db, name)
    except TApplicationException as e:
        if e.type != TApplicationException.UNKNOWN_METHOD:
            raise
        if "get_table" not in FALLBACKS:
            FALLBACKS.append("get_table")
        return call(cli, "get_table_req", T.GetTableRequest(dbName=db, tblName=name)).table


def make_table(db, name):
    cols = [T.FieldSchema("id", "int", ""), T.FieldSchema("amount", "double", ""),
            T.FieldSchema("note", "string", "")]
    serde = T.SerDeInfo(name=None,
                        serializationLib="org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe",
                        parameters={"serialization.format": ","})
    sd = T.StorageDescriptor(cols=cols, location=None,
                             inputFormat="org.apache.hadoop.mapred.TextInputFormat",
                             outputFormat="org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat",
                             compressed=False, numBuckets=-1, serdeInfo=serde,
                             bucketCols=[], sortCols=[], parameters={})
    return T.Table(tableName=name, dbName=db, owner=getpass.getuser(),
                   createTime=int(time.time()), lastAccessTime=0, retention=0, sd=sd,
                   partitionKeys=[T.FieldSchema("dt", "string", ""),
                                  T.FieldSchema("region", "string", "")],
                   parameters={"EXTERNAL": "TRUE", "hmstb.owner": "py"},
                   tableType="EXTERNAL_TABLE")


def make_partition(tbl, values, location):
    sd = copy.deepcopy(tbl.sd)
    sd.location = location
    return T.Partition(values=values, dbName=tbl.dbName, tableName=tbl.tableName,
                       createTime=int(time.time()), lastAccessTime=0, sd=sd, parameters={})


def run(cli, db, workdir, keep):
    tname = "events"
    # clean leftovers of an earlier run
    # (dropping a missing database makes some servers NPE in their listener code)
    if db in call(cli, "get_all_databases"):
        call(cli, "drop_database", db, True, True)

    call(cli, "create_database", T.Database(name=db, description="hmsproxy test bed",
                                            locationUri=f"file://{workdir}/{db}.db",
                                            parameters={"k": "v"}))
    dbs = call(cli, "get_all_databases")
    check(db in dbs and "default" in dbs, f"get_all_databases: {dbs}")
    check(db in call(cli, "get_databases", "hmstb_*"), "get_databases pattern")
    d = call(cli, "get_database", db)
    check(d.name == db and d.parameters.get("k") == "v", f"get_database: {d}")

    tbl = make_table(db, tname)
    tbl.sd.location = f"file://{workdir}/{db}.db/{tname}"
    call(cli, "create_table", tbl)
    t = get_table(cli, db, tname)
    check([k.name for k in t.partitionKeys] == ["dt", "region"], f"partition keys {t.partitionKeys}")
    check([c.name for c in t.sd.cols] == ["id", "amount", "note"], f"cols {t.sd.cols}")
    check(call(cli, "get_all_tables", db) == [tname], "get_all_tables")
    check(call(cli, "get_tables", db, "ev*") == [tname], "get_tables pattern")
    check([f.name for f in call(cli, "get_fields", db, tname)] == ["id", "amount", "note"], "get_fields")
    check(len(call(cli, "get_schema", db, tname)) == 5, "get_schema (cols + partition keys)")

    specs = [("2024-01-01", "eu"), ("2024-01-01", "us"), ("2024-01-02", "eu"),
             ("2024-01-03", "ap")]
    parts = [make_partition(t, list(v), f"{t.sd.location}/dt={v[0]}/region={v[1]}") for v in specs]
    added = call(cli, "add_partitions", parts)
    check(added == len(specs), f"add_partitions returned {added}")

    names = call(cli, "get_partition_names", db, tname, -1)
    want = sorted(f"dt={a}/region={b}" for a, b in specs)
    check(sorted(names) == want, f"get_partition_names: {names}")
    check(len(call(cli, "get_partitions", db, tname, -1)) == 4, "get_partitions")
    p = call(cli, "get_partition", db, tname, ["2024-01-02", "eu"])
    check(p.values == ["2024-01-02", "eu"], f"get_partition {p.values}")
    p = call(cli, "get_partition_by_name", db, tname, "dt=2024-01-03/region=ap")
    check(p.values == ["2024-01-03", "ap"], "get_partition_by_name")
    got = call(cli, "get_partitions_by_names", db, tname,
               ["dt=2024-01-01/region=us", "dt=2024-01-03/region=ap", "dt=1999-01-01/region=xx"])
    check(sorted(x.values[1] for x in got) == ["ap", "us"], "get_partitions_by_names")
    eu = call(cli, "get_partitions_by_filter", db, tname, 'region = "eu"', -1)
    check(sorted(x.values[0] for x in eu) == ["2024-01-01", "2024-01-02"], "filter region=eu")
    late = call(cli, "get_partitions_by_filter", db, tname, 'dt >= "2024-01-02"', -1)
    check(len(late) == 2, f"filter dt>=: {[x.values for x in late]}")
    both = call(cli, "get_partitions_by_filter", db, tname,
                'dt = "2024-01-01" and region <> "eu"', -1)
    check([x.values for x in both] == [["2024-01-01", "us"]], "filter and")
    ps = call(cli, "get_partition_names_ps", db, tname, ["2024-01-01", ""], -1)
    check(sorted(ps) == ["dt=2024-01-01/region=eu", "dt=2024-01-01/region=us"], f"names_ps {ps}")

    # alter: add a column and a table property
    t2 = get_table(cli, db, tname)
    t2.sd.cols.append(T.FieldSchema("extra", "string", "added"))
    t2.parameters["hmstb.altered"] = "yes"
    call(cli, "alter_table", db, tname, t2)
    t3 = get_table(cli, db, tname)
    check(t3.parameters.get("hmstb.altered") == "yes", "alter_table property")
    check([c.name for c in t3.sd.cols][-1] == "extra", "alter_table column")

    check(call(cli, "drop_partition", db, tname, ["2024-01-03", "ap"], False), "drop_partition")
    check(len(call(cli, "get_partition_names", db, tname, -1)) == 3, "names after drop")
    try:
        call(cli, "get_partition", db, tname, ["2024-01-03", "ap"])
        check(False, "dropped partition still there")
    except T.NoSuchObjectException:
        pass
    try:
        nid = call(cli, "get_current_notificationEventId").eventId
    except Exception as e:  # noqa: BLE001 - report, do not fail
        nid = f"n/a ({type(e).__name__})"
    if not keep:
        call(cli, "drop_table", db, tname, False)
        call(cli, "drop_database", db, False, False)
        check(db not in call(cli, "get_all_databases"), "database still listed after drop")
    return nid


def check_spark_table(cli, full):
    db, tname = full.split(".", 1)
    t = get_table(cli, db, tname)
    names = call(cli, "get_partition_names", db, tname, -1)
    check(len(names) > 0, f"{full}: no partitions")
    return f"{full}:{len(names)}parts"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("uri")
    ap.add_argument("--db", default="hmstb_py")
    ap.add_argument("--workdir", default="/tmp/hmstb-py")
    ap.add_argument("--keep", action="store_true", help="leave the database behind")
    ap.add_argument("--check-spark-table", default=None)
    a = ap.parse_args()
    u = urlparse(a.uri)
    check(u.scheme == "thrift", "uri must be thrift://host:port")
    t0 = time.time()
    cli = hmsclient.HMSClient(host=u.hostname, port=u.port)
    extra = ""
    try:
        with cli:
            call(cli, "set_ugi", getpass.getuser(), [])
            nid = run(cli, a.db, a.workdir, a.keep)
            if a.check_spark_table:
                extra = " " + check_spark_table(cli, a.check_spark_table)
    except Exception as e:  # noqa: BLE001
        print(f"py_hms_client FAIL uri={a.uri} after {len(CALLS)} calls, last={CALLS[-1:]}: "
              f"{type(e).__name__}: {e}")
        return 1
    print(f"py_hms_client OK uri={a.uri} calls={len(CALLS)} distinct={len(set(CALLS))} "
          f"notification_id={nid}{extra} legacy_refused={','.join(FALLBACKS) or '-'} secs={time.time() - t0:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
