#!/usr/bin/env python3
"""Spark SQL through a federated hmsproxy: a primary and a read-only member.

    spark_federation.py thrift://127.0.0.1:9083 WORKDIR MAIN_DB LAKE_DB LAKE_TABLE

MAIN_DB lives in the primary (writable), LAKE_DB.LAKE_TABLE in the member
(a text table with a row id=1). Spark must see both databases, join a
table of each, write to the primary and be refused on the member with
the proxy's read-only message. Exits non-zero on the first mismatch;
prints one summary line on stdout.
"""
import os
import sys
import time

from spark_client import test_bed_session


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def main():
    uri, wd, main_db, lake_db, lake_t = sys.argv[1:6]
    wd = os.path.abspath(wd)
    os.makedirs(wd, exist_ok=True)
    t0 = time.time()
    from pyspark.sql import SparkSession  # imported late: slow

    spark = (test_bed_session(SparkSession.builder, uri, wd, f"-Dderby.system.home={wd}")
             .appName("hmstb-federation").enableHiveSupport().getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")

    dbs = [r[0] for r in spark.sql("SHOW DATABASES").collect()]
    check(main_db in dbs and lake_db in dbs, f"SHOW DATABASES {dbs} lacks {main_db} or {lake_db}")

    spark.sql(f"CREATE TABLE {main_db}.people (id BIGINT, name STRING) STORED AS TEXTFILE")
    spark.sql(f"INSERT INTO {main_db}.people VALUES (1, 'alice'), (2, 'bob')")
    rows = spark.sql(f"SELECT p.name, l.name FROM {main_db}.people p JOIN {lake_db}.{lake_t} l ON p.id = l.id").collect()
    check([(r[0], r[1]) for r in rows] == [("alice", "from-lake")], f"join across groups: {rows}")

    refused = ""
    try:
        spark.sql(f"CREATE TABLE {lake_db}.spark_new (id BIGINT) STORED AS TEXTFILE")
    except Exception as e:  # AnalysisException carrying the MetaException
        refused = str(e)
    check("read-only" in refused, f"CREATE TABLE on the read-only member was not refused by the proxy: {refused[:300]!r}")
    tables = [r[1] for r in spark.sql(f"SHOW TABLES IN {lake_db}").collect()]
    check("spark_new" not in tables, f"the refused table exists: {tables}")
    print(f"spark-federation OK: {len(dbs)} databases, join across groups, write to primary, refused on member "
          f"({time.time() - t0:.1f}s)")


if __name__ == "__main__":
    main()
