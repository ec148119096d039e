#!/usr/bin/env bash
# Build (once, cached) and run the HiveMetaStoreClient smoke client.
#   testbed/clients/java_client.sh CLIENT_VERSION URI [WORKDIR]
# CLIENT_VERSION is 3.1 or 4.0: which Hive client jars to run with.
# JAVA_CLIENT_OPTS (env) adds JVM options, e.g. -Dmetastore.use.SSL=true
# -Dmetastore.truststore.path=... (MetastoreConf reads its keys from system
# properties).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CACHE=${HMSPROXY_CACHE:-$HOME/.cache/hmsproxy-testbed}
ver=${1:?usage: java_client.sh 3.1|4.0 thrift://host:port [WORKDIR]}
uri=${2:?usage: java_client.sh 3.1|4.0 thrift://host:port [WORKDIR]}
work=${3:-$(mktemp -d /tmp/hmstb-java.XXXXXX)}
case "$ver" in 3.1) prof=hive31 ;; 4.0) prof=hive40 ;; *) echo "bad version $ver" >&2; exit 2 ;; esac
proj="$HERE/javaclient"
jar="$proj/target/$prof/javaclient-1.jar"
src_newer=$(find "$proj/src" "$proj/pom.xml" -newer "$jar" 2>/dev/null | head -1 || true)
if [[ ! -f "$jar" || -n "$src_newer" ]]; then
  echo "[java_client] building $prof" >&2
  out=$(cd "$proj" && mvn -q -B "-Dmaven.repo.local=$CACHE/m2" -P "$prof" package 2>&1) \
    || { printf '%s\n' "$out" >&2; exit 1; }
fi
cp=$("$HERE/../hms.sh" classpath "$ver")
# log4j2 config: warnings only
mkdir -p "$work/conf"
printf 'rootLogger.level = WARN\nrootLogger.appenderRef.c.ref = c\nappender.c.type = Console\nappender.c.name = c\nappender.c.target = SYSTEM_ERR\nappender.c.layout.type = PatternLayout\nappender.c.layout.pattern = %%p %%c{1}: %%m%%n\n' > "$work/conf/log4j2.properties"
# shellcheck disable=SC2086 # JAVA_CLIENT_OPTS is a list of options
exec java -Xmx512m ${JAVA_CLIENT_OPTS:-} -Dlog4j2.configurationFile="$work/conf/log4j2.properties" \
  -cp "$jar:$cp" io.hmsproxy.testbed.HmsSmoke "$uri" "$work"
