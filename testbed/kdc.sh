#!/usr/bin/env bash
# A real MIT Kerberos KDC on loopback for the hmsproxy test bed: realm
# HMSPROXY.TEST, its principals and keytabs, and a second realm FOREIGN.TEST
# that HMSPROXY.TEST trusts (one-way: FOREIGN.TEST users get tickets for
# HMSPROXY.TEST services), all under one work directory.
#
#   testbed/kdc.sh start WORKDIR [PORT]   # idempotent; PORT default 8888 (TCP and UDP)
#   testbed/kdc.sh stop WORKDIR
#   testbed/kdc.sh env WORKDIR            # print KRB5_CONFIG=... for a shell
#
# WORKDIR then holds krb5.conf (clients: KRB5_CONFIG or -Djava.security.krb5.conf)
# and one keytab per principal, named after its first component:
#   hive.keytab      hive/localhost@HMSPROXY.TEST      the metastore's service principal
#   hmsproxy.keytab  hmsproxy/localhost@HMSPROXY.TEST  the proxy's service principal
#   alice.keytab     alice@HMSPROXY.TEST               an end user
#   bob.keytab       bob@HMSPROXY.TEST                 an end user
#   admin.keytab     admin@HMSPROXY.TEST               an end user (the test-bed filter hook's admin)
#   short.keytab     short@HMSPROXY.TEST               tickets live KDC_SHORT_LIFE (default 2 seconds)
#   foreign-alice.keytab  alice@FOREIGN.TEST           a user of the trusted foreign realm, who
#                                                      shares a short name with alice@HMSPROXY.TEST
#
# Principals use the host name "localhost" and krb5.conf turns off DNS and
# reverse look-ups, so that nothing depends on the machine's resolver.
# Needs krb5kdc, kdb5_util and kadmin.local: scripts/deps.sh installs them.
set -euo pipefail

REALM=HMSPROXY.TEST
FOREIGN=FOREIGN.TEST
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TB_NAME=kdc.sh
# shellcheck source=testbed/lib.sh
source "$HERE/lib.sh"

PATH=$PATH:/usr/sbin:/sbin
for b in krb5kdc kdb5_util kadmin.local; do
  command -v "$b" >/dev/null || die "$b not found: run scripts/deps.sh (Debian krb5-kdc, krb5-admin-server)"
done

write_conf() { # work port
  local work=$1 port=$2
  cat > "$work/krb5.conf" <<CONF
[libdefaults]
  default_realm = $REALM
  dns_lookup_realm = false
  dns_lookup_kdc = false
  rdns = false
  dns_canonicalize_hostname = false
  udp_preference_limit = 1
  ticket_lifetime = 1h
  forwardable = false
  default_tkt_enctypes = aes256-cts-hmac-sha1-96 aes128-cts-hmac-sha1-96
  default_tgs_enctypes = aes256-cts-hmac-sha1-96 aes128-cts-hmac-sha1-96
  permitted_enctypes = aes256-cts-hmac-sha1-96 aes128-cts-hmac-sha1-96

[realms]
  $REALM = {
    kdc = 127.0.0.1:$port
  }
  $FOREIGN = {
    kdc = 127.0.0.1:$port
  }

[capaths]
  $FOREIGN = {
    $REALM = .
  }

[domain_realm]
  localhost = $REALM
  127.0.0.1 = $REALM
CONF
  cat > "$work/kdc.conf" <<CONF
[kdcdefaults]
  kdc_ports = $port
  kdc_tcp_ports = $port

[realms]
  $REALM = {
    database_name = $work/db/principal
    key_stash_file = $work/db/stash
    acl_file = $work/db/kadm5.acl
    max_life = 1h
    max_renewable_life = 0
    supported_enctypes = aes256-cts-hmac-sha1-96:normal aes128-cts-hmac-sha1-96:normal
  }
  $FOREIGN = {
    database_name = $work/db-foreign/principal
    key_stash_file = $work/db-foreign/stash
    acl_file = $work/db/kadm5.acl
    max_life = 1h
    max_renewable_life = 0
    supported_enctypes = aes256-cts-hmac-sha1-96:normal aes128-cts-hmac-sha1-96:normal
  }

[logging]
  kdc = FILE:$work/kdc.log
CONF
}

kenv() { KRB5_CONFIG="$1/krb5.conf" KRB5_KDC_PROFILE="$1/kdc.conf" "${@:2}"; }

make_db() { # work
  local work=$1
  [[ -f "$work/db/principal" ]] && return 0
  log "creating realm $REALM in $work/db"
  mkdir -p "$work/db"; : > "$work/db/kadm5.acl"
  kenv "$work" kdb5_util create -s -r "$REALM" -P "masterkey-$$-$RANDOM" >/dev/null
  local p
  for p in hive/localhost hmsproxy/localhost alice bob admin; do
    kenv "$work" kadmin.local -q "addprinc -randkey $p@$REALM" >/dev/null
    kenv "$work" kadmin.local -q "ktadd -k $work/${p%%/*}.keytab $p@$REALM" >/dev/null
  done
  kenv "$work" kadmin.local -q "addprinc -randkey -maxlife \"${KDC_SHORT_LIFE:-2 seconds}\" short@$REALM" >/dev/null
  kenv "$work" kadmin.local -q "ktadd -k $work/short.keytab short@$REALM" >/dev/null
  make_foreign "$work"
}

make_foreign() { # work: the trusted realm, whose users reach HMSPROXY.TEST services
  local work=$1
  [[ -f "$work/db-foreign/principal" ]] && return 0
  log "creating realm $FOREIGN in $work/db-foreign, trusted by $REALM"
  mkdir -p "$work/db-foreign"
  kenv "$work" kdb5_util -r "$FOREIGN" create -s -P "masterkey-$$-$RANDOM" >/dev/null
  # the cross-realm key: one principal of the same name and password in both
  # databases (the same salt, so the same key)
  local trust="trust-$$-$RANDOM-$RANDOM"
  local r
  for r in "$REALM" "$FOREIGN"; do
    kenv "$work" kadmin.local -r "$r" -q "addprinc -pw $trust krbtgt/$REALM@$FOREIGN" >/dev/null
  done
  kenv "$work" kadmin.local -r "$FOREIGN" -q "addprinc -randkey alice@$FOREIGN" >/dev/null
  kenv "$work" kadmin.local -r "$FOREIGN" -q "ktadd -k $work/foreign-alice.keytab alice@$FOREIGN" >/dev/null
}

start() { # work [port]
  mkdir -p "$1"; local work; work=$(cd "$1" && pwd)
  local port=${2:-8888}
  if [[ -f "$work/kdc.pid" ]] && kill -0 "$(cat "$work/kdc.pid")" 2>/dev/null; then
    [[ "$(cat "$work/kdc.port")" == "$port" ]] || die "KDC in $work already runs on port $(cat "$work/kdc.port")"
    log "KDC already running in $work on 127.0.0.1:$port"; return 0
  fi
  port_open "$port" && die "port $port on 127.0.0.1 is already in use"
  write_conf "$work" "$port"
  make_db "$work"
  make_foreign "$work" # a work directory made before FOREIGN.TEST existed
  (
    cd "$work"
    KRB5_CONFIG="$work/krb5.conf" KRB5_KDC_PROFILE="$work/kdc.conf" \
      exec setsid krb5kdc -n -r "$REALM" -r "$FOREIGN" > "$work/kdc.out" 2>&1 < /dev/null
  ) &
  local pid=$!
  echo "$pid" > "$work/kdc.pid"; echo "$port" > "$work/kdc.port"
  local i
  for i in $(seq 1 100); do
    port_open "$port" && break
    kill -0 "$pid" 2>/dev/null || { cat "$work/kdc.out" "$work/kdc.log" >&2 2>/dev/null; rm -f "$work/kdc.pid"; die "krb5kdc exited"; }
    sleep 0.1
  done
  port_open "$port" || { stop "$work"; die "krb5kdc not listening on $port"; }
  log "KDC for $REALM ready on 127.0.0.1:$port (pid $pid, workdir $work)"
}

stop() { stop_pidfile KDC "$1" "$1/kdc.pid" 16; } # work

cmd=${1:-}; shift || true
case "$cmd" in
  start) [[ $# -ge 1 && $# -le 2 ]] || die "usage: kdc.sh start WORKDIR [PORT]"; start "$@" ;;
  stop) [[ $# -eq 1 ]] || die "usage: kdc.sh stop WORKDIR"; stop "$1" ;;
  env) [[ $# -eq 1 ]] || die "usage: kdc.sh env WORKDIR"; echo "KRB5_CONFIG=$(cd "$1" && pwd)/krb5.conf" ;;
  *) die "usage: kdc.sh start|stop|env ..." ;;
esac
