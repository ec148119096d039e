#!/usr/bin/env bash
# A real Apache Kafka broker for the hmsproxy test bed's change-feed tests:
# KRaft mode, one process that is both broker and controller, on loopback,
# from Maven Central's jars (testbed/maven/kafka) cached like the metastores.
#
#   testbed/kafka.sh fetch                      # resolve the jars (idempotent)
#   testbed/kafka.sh start WORKDIR PORT         # background broker on 127.0.0.1:PORT
#   testbed/kafka.sh stop WORKDIR
#   testbed/kafka.sh classpath                  # print the broker's classpath
#
# start formats WORKDIR/data with Kafka's own StorageTool the first time; a
# later start on the same WORKDIR keeps the topics and their records, so a
# test can stop the broker and bring the same one back.
#
# Environment:
#   HMSPROXY_CACHE      cache root (default $HOME/.cache/hmsproxy-testbed)
#   KAFKA_CONTROLLER_PORT  the KRaft controller's port (default PORT+1)
#   KAFKA_SASL_PORT     also listen with SASL_PLAINTEXT (mechanism PLAIN) on
#                       this port; user "hmsproxy", password "hmsproxy-secret"
#   KAFKA_SSL_PORT      also listen with TLS on this port, with a self-signed
#                       certificate for 127.0.0.1 and localhost made by openssl:
#                       clients trust WORKDIR/ssl/cert.pem
#   KAFKA_OWNER_PID     stop the broker when this process is gone: a test
#                       binary that panics or is killed runs no cleanup
#   KAFKA_START_TIMEOUT seconds to wait for the port (default 90)
#   KAFKA_HEAP          JVM -Xmx (default 384m)
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CACHE=${HMSPROXY_CACHE:-$HOME/.cache/hmsproxy-testbed}
M2="$CACHE/m2"
POM="$HERE/maven/kafka"
KAFKA_VERSION=$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$POM/pom.xml")
DIR="$CACHE/kafka-$KAFKA_VERSION"
KAFKA_HEAP=${KAFKA_HEAP:-384m}
KAFKA_START_TIMEOUT=${KAFKA_START_TIMEOUT:-90}
CLUSTER_ID=aG1zcHJveHktdGVzdGJlZA   # any 22-character base64 UUID; fixed so restarts agree

TB_NAME=kafka.sh
# shellcheck source=testbed/lib.sh
source "$HERE/lib.sh"

fetch() {
  local sum; sum=$(sha1sum < "$POM/pom.xml" | cut -c1-12)
  if [[ -f "$DIR/.stamp-$sum" && -f "$DIR/classpath" ]]; then return 0; fi
  # Test packages start brokers in parallel: one fetch at a time, and the
  # others find its stamp.
  mkdir -p "$CACHE"
  exec 9>"$CACHE/.kafka-fetch.lock"
  flock 9
  if [[ -f "$DIR/.stamp-$sum" && -f "$DIR/classpath" ]]; then flock -u 9; return 0; fi
  log "resolving Apache Kafka $KAFKA_VERSION with Maven into $DIR/lib"
  rm -rf "$DIR"; mkdir -p "$DIR"
  local out rc=0
  out=$(cd "$POM" && mvn -q -B -Dstyle.color=never "-Dmaven.repo.local=$M2" \
    dependency:copy-dependencies -DincludeScope=runtime "-DoutputDirectory=$DIR/lib" 2>&1) || rc=$?
  if (( rc != 0 )); then printf '%s\n' "$out" >&2; die "maven failed"; fi
  echo "$DIR/lib/*" > "$DIR/classpath"
  touch "$DIR/.stamp-$sum"
  flock -u 9
}

classpath() { fetch; cat "$DIR/classpath"; }

write_conf() { # work port cport
  local work=$1 port=$2 cport=$3
  local listeners="PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$cport"
  local advertised="PLAINTEXT://127.0.0.1:$port"
  local protos="PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"
  if [[ -n ${KAFKA_SASL_PORT:-} ]]; then
    listeners="$listeners,SASL_PLAINTEXT://127.0.0.1:$KAFKA_SASL_PORT"
    advertised="$advertised,SASL_PLAINTEXT://127.0.0.1:$KAFKA_SASL_PORT"
    protos="$protos,SASL_PLAINTEXT:SASL_PLAINTEXT"
  fi
  local ssl=""
  if [[ -n ${KAFKA_SSL_PORT:-} ]]; then
    listeners="$listeners,SSL://127.0.0.1:$KAFKA_SSL_PORT"
    advertised="$advertised,SSL://127.0.0.1:$KAFKA_SSL_PORT"
    protos="$protos,SSL:SSL"
    mkdir -p "$work/ssl"
    if [[ ! -f "$work/ssl/keystore.pem" ]]; then
      openssl req -x509 -newkey rsa:2048 -nodes -days 7 -subj /CN=localhost \
        -addext "subjectAltName=IP:127.0.0.1,DNS:localhost" \
        -keyout "$work/ssl/key.pem" -out "$work/ssl/cert.pem" 2>/dev/null
      cat "$work/ssl/key.pem" "$work/ssl/cert.pem" > "$work/ssl/keystore.pem"
    fi
    ssl="listener.name.ssl.ssl.keystore.type=PEM
listener.name.ssl.ssl.keystore.location=$work/ssl/keystore.pem"
  fi
  cat > "$work/server.properties" <<PROPS
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$cport
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listeners=$listeners
advertised.listeners=$advertised
listener.security.protocol.map=$protos
sasl.enabled.mechanisms=PLAIN
listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="hmsproxy" password="hmsproxy-secret" user_hmsproxy="hmsproxy-secret";
log.dirs=$work/data
num.partitions=3
auto.create.topics.enable=true
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
group.initial.rebalance.delay.ms=0
log.flush.interval.messages=1000000
$ssl
PROPS
  cat > "$work/log4j2.properties" <<'PROPS'
rootLogger.level = WARN
rootLogger.appenderRef.c.ref = c
appender.c.type = Console
appender.c.name = c
appender.c.layout.type = PatternLayout
appender.c.layout.pattern = %d %p %c{1}: %m%n
PROPS
}

jvm() { # main-class args...
  local cp; cp=$(classpath)
  java "-Xmx$KAFKA_HEAP" -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Xshare:auto \
    -Dlog4j2.configurationFile="$WORK/log4j2.properties" -Djava.io.tmpdir="$WORK" \
    -cp "$cp" "$@"
}

start() { # workdir port
  local port=$2
  mkdir -p "$1"; WORK=$(cd "$1" && pwd)
  local cport=${KAFKA_CONTROLLER_PORT:-$((port + 1))}
  [[ -f "$WORK/kafka.pid" ]] && kill -0 "$(cat "$WORK/kafka.pid")" 2>/dev/null \
    && die "already running in $WORK (pid $(cat "$WORK/kafka.pid"))"
  port_open "$port" && die "port $port on 127.0.0.1 is already in use"
  fetch
  write_conf "$WORK" "$port" "$cport"
  if [[ ! -f "$WORK/data/meta.properties" ]]; then
    log "formatting $WORK/data (cluster $CLUSTER_ID)"
    jvm kafka.tools.StorageTool format -t "$CLUSTER_ID" -c "$WORK/server.properties" \
      > "$WORK/format.log" 2>&1 || { cat "$WORK/format.log" >&2; die "StorageTool format failed"; }
  fi
  log "starting Kafka $KAFKA_VERSION on 127.0.0.1:$port (controller $cport, workdir $WORK)"
  local t0=$SECONDS cp; cp=$(classpath)
  (
    cd "$WORK"
    exec setsid java "-Xmx$KAFKA_HEAP" -XX:+UseSerialGC -XX:TieredStopAtLevel=1 \
      -Dlog4j2.configurationFile="$WORK/log4j2.properties" -Djava.io.tmpdir="$WORK" \
      -cp "$cp" kafka.Kafka "$WORK/server.properties" >> "$WORK/kafka.log" 2>&1 < /dev/null
  ) &
  local pid=$!
  echo "$pid" > "$WORK/kafka.pid"
  echo "$port" > "$WORK/kafka.port"
  trap 'kill "$pid" 2>/dev/null; rm -f "$WORK/kafka.pid"' INT TERM
  await_port Kafka "$port" "$pid" "$WORK" "$WORK/kafka.log" "$WORK/kafka.pid" "$t0" "$KAFKA_START_TIMEOUT"
  trap - INT TERM
  if [[ -n ${KAFKA_OWNER_PID:-} ]]; then
    owner=$KAFKA_OWNER_PID setsid bash -c 'while kill -0 "$owner" 2>/dev/null && kill -0 '"$pid"' 2>/dev/null; do sleep 1; done
      kill '"$pid"' 2>/dev/null' </dev/null >/dev/null 2>&1 &
  fi
  log "Kafka ready on 127.0.0.1:$port after $((SECONDS - t0))s (pid $pid)"
}

stop() { stop_pidfile Kafka "$1" "$1/kafka.pid" 60; } # workdir

cmd=${1:-}
case "$cmd" in
  fetch) fetch ;;
  classpath) classpath ;;
  start) [[ $# -eq 3 ]] || die "usage: $0 start WORKDIR PORT"; start "$2" "$3" ;;
  stop) [[ $# -eq 2 ]] || die "usage: $0 stop WORKDIR"; stop "$2" ;;
  *) die "usage: $0 fetch | start WORKDIR PORT | stop WORKDIR | classpath" ;;
esac
