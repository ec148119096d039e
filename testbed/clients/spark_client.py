#!/usr/bin/env python3
"""Spark SQL (PySpark, its built-in Hive 2.3 metastore client) against a real
metastore: DDL, partitioned writes, pruned reads, alter, rename, drop.

    spark_client.py thrift://127.0.0.1:9083 WORKDIR [--db NAME] [--keep] [--planning ROUNDS]

Exits non-zero on the first mismatch; prints one summary line on stdout.
--keep leaves database NAME with table `sales` (3 partitions) behind.
--planning ROUNDS then, in the same session, makes a table of 12 partitions
with statistics (ANALYZE), and plans ten dashboard queries over it ROUNDS
times, each round also asking through Hive's own client what a planner that
reads column statistics asks (HivePlanner). Before each round it prints
`planning: round N ready` and
waits for a line on stdin, so that whoever reads the proxy's counters can
take them between rounds; after the last, `planning: done`.
"""
import argparse
import os
import random
import sys
import time

STEPS = []


def check(cond, what):
    if not cond:
        raise AssertionError(what)


# The dashboard: ten queries a BI tool sends again on every refresh, each
# planned against the metastore (table, partitions pruned by filter).
DASHBOARD = [
    "SELECT region, sum(amount) FROM {t} WHERE dt = '2024-02-01' GROUP BY region",
    "SELECT count(*) FROM {t} WHERE dt >= '2024-02-03'",
    "SELECT dt, count(*) FROM {t} WHERE region = 'eu' GROUP BY dt",
    "SELECT max(amount) FROM {t} WHERE dt = '2024-02-02' AND region = 'us'",
    "SELECT dt, region, avg(amount) FROM {t} WHERE dt BETWEEN '2024-02-01' AND '2024-02-02' GROUP BY dt, region",
    "SELECT count(DISTINCT id) FROM {t} WHERE region IN ('eu', 'apac')",
    "SELECT sum(amount) FROM {t}",
    "SELECT region, count(*) FROM {t} WHERE dt = '2024-02-04' GROUP BY region",
    "SELECT id, amount FROM {t} WHERE dt = '2024-02-03' AND region = 'eu' ORDER BY id LIMIT 5",
    "SELECT dt, sum(amount) FROM {t} WHERE dt <> '2024-02-01' AND region <> 'us' GROUP BY dt",
]


def planning(spark, sql, uri, db, rounds):
    t = f"{db}.dash"
    t0 = time.time()
    sql(f"CREATE TABLE {t} (id INT, amount DOUBLE, note STRING) "
        "PARTITIONED BY (dt STRING, region STRING) STORED AS PARQUET")
    rows = ", ".join(f"({i}, {i * 1.5}, 'n{i}', '2024-02-0{1 + i % 4}', '{('eu', 'us', 'apac')[i % 3]}')"
                     for i in range(36))
    sql(f"INSERT INTO {t} PARTITION (dt, region) SELECT * FROM VALUES {rows}")
    parts = sorted(r[0] for r in sql(f"SHOW PARTITIONS {t}"))
    check(len(parts) == 12, f"dashboard partitions {len(parts)}")
    sql(f"ANALYZE TABLE {t} PARTITION (dt, region) COMPUTE STATISTICS")
    sql(f"ANALYZE TABLE {t} COMPUTE STATISTICS FOR COLUMNS id, amount")
    answers = [sql(q.format(t=t)) for q in DASHBOARD]
    hive = HivePlanner(spark, uri, db, "dash", parts)
    for r in range(1, rounds + 1):
        # A call on the metastore connection: once answered, the proxy has
        # counted every call before it (it counts a call before reading
        # the next), so the counts taken now end with the last round.
        spark.catalog.databaseExists(db)
        print(f"planning: round {r} ready", flush=True)
        sys.stdin.readline()
        for q in DASHBOARD:
            # Planning only: the metastore is read while the plan is made
            # (the table, its partitions pruned by the filter).
            spark.sql(q.format(t=t))._jdf.queryExecution().executedPlan()
        hive.round(r)
    spark.catalog.databaseExists(db)
    print("planning: done", flush=True)
    check([sql(q.format(t=t)) for q in DASHBOARD] == answers, "the dashboard answered otherwise after the rounds")
    hive.close()
    sql(f"DROP TABLE {t}")
    print(f"planning: {rounds} rounds in {time.time() - t0:.1f}s", file=sys.stderr)


class HivePlanner:
    """What a planner that reads column statistics (Trino, Impala, Hive) asks
    of the metastore, through the Hive 2.3 client inside Spark's JVM: the
    partitions a query reads by name, and their and the table's column
    statistics, for a column set and a partition set that change from
    query to query and come in another order each round."""

    QUERIES = [(["id", "amount"], 0, 12), (["amount"], 0, 3), (["id"], 3, 9),
               (["amount", "id"], 6, 12), (["ID", "amount"], 2, 5), (["id", "note"], 0, 6)]

    def __init__(self, spark, uri, db, table, parts):
        jvm = spark._jvm
        self.jvm, self.db, self.table, self.parts = jvm, db, table, parts
        conf = jvm.org.apache.hadoop.hive.conf.HiveConf()
        conf.set("hive.metastore.uris", uri)
        self.client = jvm.org.apache.hadoop.hive.metastore.HiveMetaStoreClient(conf)
        api = jvm.org.apache.hadoop.hive.metastore.api
        for i, part in enumerate(parts):
            desc = api.ColumnStatisticsDesc(False, db, table)
            desc.setPartName(part)
            self.client.updatePartitionColumnStatistics(api.ColumnStatistics(desc, self.objs(api, i)))
        self.client.updateTableColumnStatistics(api.ColumnStatistics(api.ColumnStatisticsDesc(True, db, table), self.objs(api, 99)))

    def objs(self, api, n):
        out = self.jvm.java.util.ArrayList()
        data = api.ColumnStatisticsData()
        data.setLongStats(api.LongColumnStatsData(0, n + 1))
        out.add(api.ColumnStatisticsObj("id", "int", data))
        data = api.ColumnStatisticsData()
        data.setDoubleStats(api.DoubleColumnStatsData(0, n + 2))
        out.add(api.ColumnStatisticsObj("amount", "double", data))
        return out

    def jlist(self, xs):
        out = self.jvm.java.util.ArrayList()
        for x in xs:
            out.add(x)
        return out

    def round(self, r):
        rnd = random.Random(r)
        for cols, lo, hi in self.QUERIES:
            names = self.parts[lo:hi]
            rnd.shuffle(names)
            cols = list(cols)
            rnd.shuffle(cols)
            got = self.client.getPartitionsByNames(self.db, self.table, self.jlist(names))
            check(got.size() == len(names), f"by names: {got.size()} of {len(names)}")
            stats = self.client.getPartitionColumnStatistics(self.db, self.table, self.jlist(names), self.jlist(cols))
            check(stats.size() == len(names), f"partition statistics of {stats.size()} of {len(names)} partitions")
            self.client.getTableColumnStatistics(self.db, self.table, self.jlist(cols))

    def close(self):
        self.client.close()


def test_bed_session(b, uri, wd, java_opts):
    """The settings every test-bed Spark session takes (spark_federation.py
    too): one local core and 1 GiB, no UI, one shuffle partition, the
    warehouse and Derby under wd, the Hive catalog at uri."""
    return (b.master("local[1]")
            .config("spark.hadoop.hive.metastore.uris", uri)
            .config("spark.sql.warehouse.dir", f"file://{wd}/spark-warehouse")
            .config("spark.sql.catalogImplementation", "hive")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.shuffle.partitions", "1")
            .config("spark.driver.memory", "1g")
            .config("spark.driver.extraJavaOptions", java_opts))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("uri")
    ap.add_argument("workdir")
    ap.add_argument("--db", default="hmstb_spark")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--hive-version", default=None,
                    help="spark.sql.hive.metastore.version (default: Spark's built-in 2.3.9)")
    ap.add_argument("--hive-jars", default="maven",
                    help="with --hive-version: 'maven' (Ivy cache under HMSPROXY_CACHE) "
                         "or a classpath for spark.sql.hive.metastore.jars.path")
    ap.add_argument("--resolve-only", action="store_true",
                    help="with --hive-version and maven jars: only download the Hive "
                         "client into the Ivy cache (the test bed's fetch does, so that "
                         "a timed run does not), then exit; uri may point nowhere")
    ap.add_argument("--planning", type=int, default=0, metavar="ROUNDS",
                    help="after the steps, run the planning workload ROUNDS times (see above)")
    ap.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                    help="extra Spark conf, repeatable (e.g. spark.hadoop.hive.metastore.use.SSL=true)")
    a = ap.parse_args()
    wd = os.path.abspath(a.workdir)
    os.makedirs(wd, exist_ok=True)
    t0 = time.time()

    from pyspark.sql import SparkSession  # imported late: slow

    b = SparkSession.builder
    java_opts = f"-Dderby.system.home={wd}"
    if a.hive_version:
        b = b.config("spark.sql.hive.metastore.version", a.hive_version)
        if a.hive_jars == "maven":
            cache = os.environ.get("HMSPROXY_CACHE",
                                   os.path.expanduser("~/.cache/hmsproxy-testbed"))
            # the Hive client download (Ivy) is cached under the test-bed cache;
            # ivy.home is what Spark's metastore-jar download honours
            java_opts += f" -Divy.home={os.path.join(cache, 'ivy')}"
            b = (b.config("spark.sql.hive.metastore.jars", "maven")
                 .config("spark.jars.ivy", os.path.join(cache, "ivy"))
                 # only Maven Central (the default adds a Google mirror)
                 .config("spark.sql.maven.additionalRemoteRepositories",
                         "https://repo1.maven.org/maven2/"))
        else:
            b = (b.config("spark.sql.hive.metastore.jars", "path")
                 .config("spark.sql.hive.metastore.jars.path", a.hive_jars))
    for kv in a.conf:
        k, _, v = kv.partition("=")
        b = b.config(k, v)
    spark = (test_bed_session(b, a.uri, wd, java_opts).appName("hmstb-spark")
             .config("spark.hadoop.hive.exec.dynamic.partition.mode", "nonstrict")
             .config("spark.sql.hive.metastorePartitionPruning", "true")
             .enableHiveSupport().getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    t_session = time.time() - t0
    if a.resolve_only:
        # The Hive client is loaded, and its jars downloaded, when the
        # catalog is first used; the connection that follows may fail.
        try:
            spark.sql("SHOW DATABASES").collect()
        except Exception as e:  # noqa: BLE001 - only the download matters
            print(f"spark_client: after the download: {type(e).__name__}", file=sys.stderr)
        spark.stop()
        print(f"spark_client RESOLVED hive={a.hive_version} secs={time.time() - t0:.1f}")
        return 0
    db = a.db

    def sql(q):
        STEPS.append(q.split("(")[0].strip()[:60])
        return spark.sql(q).collect()

    try:
        sql(f"DROP DATABASE IF EXISTS {db} CASCADE")
        sql(f"CREATE DATABASE {db} COMMENT 'hmsproxy test bed' LOCATION 'file://{wd}/{db}.db'")
        check(db in [r[0] for r in sql("SHOW DATABASES")], "database not listed")
        sql(f"CREATE TABLE {db}.sales (id INT, amount DOUBLE, note STRING) "
            "PARTITIONED BY (dt STRING, region STRING) STORED AS PARQUET")
        sql(f"ALTER TABLE {db}.sales ADD PARTITION (dt='2024-01-01', region='eu') "
            "PARTITION (dt='2024-01-02', region='us')")
        sql(f"INSERT INTO {db}.sales PARTITION (dt='2024-01-01', region='eu') "
            "VALUES (1, 10.0, 'a'), (2, 20.0, 'b')")
        sql(f"INSERT INTO {db}.sales PARTITION (dt='2024-01-02', region='us') VALUES (3, 30.0, 'c')")
        # dynamic partition insert creates a partition through the metastore
        sql(f"INSERT INTO {db}.sales PARTITION (dt, region) "
            "SELECT 4, 40.0, 'd', '2024-01-03', 'eu'")
        parts = sorted(r[0] for r in sql(f"SHOW PARTITIONS {db}.sales"))
        check(parts == ["dt=2024-01-01/region=eu", "dt=2024-01-02/region=us",
                        "dt=2024-01-03/region=eu"], f"partitions {parts}")
        r = sql(f"SELECT sum(amount), count(*) FROM {db}.sales WHERE region = 'eu'")[0]
        check((r[0], r[1]) == (70.0, 3), f"region=eu -> {r}")
        r = sql(f"SELECT count(*) FROM {db}.sales WHERE dt >= '2024-01-02'")[0]
        check(r[0] == 2, f"dt>= -> {r}")
        r = sql(f"SELECT id FROM {db}.sales WHERE dt = '2024-01-01' AND region = 'eu' ORDER BY id")
        check([x[0] for x in r] == [1, 2], f"point partition -> {r}")
        desc = sql(f"DESCRIBE TABLE {db}.sales")
        cols = [x[0] for x in desc if x[0] and not x[0].startswith("#")]
        check(cols[:5] == ["id", "amount", "note", "dt", "region"], f"describe {cols}")
        sql(f"ALTER TABLE {db}.sales ADD COLUMNS (extra STRING)")
        sql(f"ALTER TABLE {db}.sales SET TBLPROPERTIES ('hmstb.altered' = 'yes')")
        props = {x[0]: x[1] for x in sql(f"SHOW TBLPROPERTIES {db}.sales")}
        check(props.get("hmstb.altered") == "yes", f"tblproperties {props}")
        cols = [x[0] for x in sql(f"DESCRIBE TABLE {db}.sales")]
        check("extra" in cols, "added column missing")
        sql(f"ALTER TABLE {db}.sales RENAME TO {db}.sales2")
        tables = [x[1] for x in sql(f"SHOW TABLES IN {db}")]
        check(tables == ["sales2"], f"tables after rename {tables}")
        r = sql(f"SELECT count(*) FROM {db}.sales2")[0]
        check(r[0] == 4, f"count after rename {r}")
        sql(f"ALTER TABLE {db}.sales2 DROP PARTITION (dt='2024-01-03', region='eu')")
        r = sql(f"SELECT count(*), sum(amount) FROM {db}.sales2")[0]
        check((r[0], r[1]) == (3, 60.0), f"after drop partition {r}")
        sql(f"ALTER TABLE {db}.sales2 RENAME TO {db}.sales")
        if a.planning:
            planning(spark, sql, a.uri, db, a.planning)
        if not a.keep:
            sql(f"DROP TABLE {db}.sales")
            check(sql(f"SHOW TABLES IN {db}") == [], "table still listed")
            sql(f"DROP DATABASE {db}")
    except Exception as e:  # noqa: BLE001
        msg = str(e).strip().splitlines()[0][:400] if str(e).strip() else repr(e)
        print(f"spark_client FAIL uri={a.uri} step={len(STEPS)} '{STEPS[-1] if STEPS else ''}': "
              f"{type(e).__name__}: {msg}")
        spark.stop()
        return 1
    spark.stop()
    print(f"spark_client OK uri={a.uri} spark={spark.version} hive_client={a.hive_version or 'builtin'} statements={len(STEPS)} "
          f"session_secs={t_session:.1f} total_secs={time.time() - t0:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
