#!/usr/bin/env bash
# Start each real metastore version in turn, run every client against it,
# stop it. Prints one result line per (server, client) and a closing
# "N passed, N failed" line; exits non-zero if an unexpected failure occurred.
#
#   testbed/run_all.sh [VERSION...]       # default: 2.3 3.1 4.0
#
# Env: HMSPROXY_CACHE (cache root), HMSTB_PORT (first port, default 19083),
#      HMSTB_WORK (work root, default a fresh mktemp dir), HMSTB_SPARK=0 skips
#      the Spark client (slowest).
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CACHE=${HMSPROXY_CACHE:-$HOME/.cache/hmsproxy-testbed}
PORT=${HMSTB_PORT:-19083}
WORK=${HMSTB_WORK:-$(mktemp -d /tmp/hmstb.XXXXXX)}
VERSIONS=("$@"); [[ ${#VERSIONS[@]} -gt 0 ]] || VERSIONS=(2.3 3.1 4.0)
PY="$CACHE/venv/bin/python"
pass=0; fail=0; xfail=0
running=""

cleanup() { [[ -n "$running" ]] && "$HERE/hms.sh" stop "$running" >/dev/null 2>&1; running=""; }
trap cleanup EXIT
trap 'cleanup; exit 130' INT TERM

# Known incompatibilities of real clients with older real servers (not bugs
# of the test bed): "server client" pairs whose failure is expected.
expected_fail() {
  case "$1 $2" in
    "2.3 java-3.1") return 0 ;;          # 3.1 client sends "@hive#db" names to get_database
    "2.3 java-4.0"|"3.1 java-4.0") return 0 ;; # create_database_req etc. unknown before 4.0
  esac
  return 1
}

result() { # server client rc secs line
  local status
  if [[ $3 -eq 0 ]]; then status=PASS; pass=$((pass + 1))
  elif expected_fail "$1" "$2"; then status=XFAIL; xfail=$((xfail + 1))
  else status=FAIL; fail=$((fail + 1)); fi
  printf '%-5s server=%s client=%-10s secs=%-4s %s\n' "$status" "$1" "$2" "$4" "$5"
}

runc() { # server client cmd...
  local s=$1 c=$2; shift 2
  local t0=$SECONDS out rc=0
  out=$("$@" 2>"$WORK/$s-$c.err") || rc=$?
  result "$s" "$c" "$rc" "$((SECONDS - t0))" "$(printf '%s' "$out" | tail -n 1)"
  [[ $rc -eq 0 ]] || tail -n 5 "$WORK/$s-$c.err" | sed 's/^/      | /'
}

# fetch everything first (idempotent; fast when cached)
for v in "${VERSIONS[@]}"; do "$HERE/hms.sh" fetch "$v" || { echo "fetch $v failed"; exit 1; }; done
"$HERE/hms.sh" fetch clients || { echo "fetch clients failed"; exit 1; }

i=0
for v in "${VERSIONS[@]}"; do
  p=$((PORT + i)); i=$((i + 1)); w="$WORK/hms-$v"; uri="thrift://127.0.0.1:$p"
  t0=$SECONDS
  if ! "$HERE/hms.sh" start "$v" "$p" "$w"; then
    result "$v" server-start 1 "$((SECONDS - t0))" "start failed"; continue
  fi
  running=$w
  echo "---- HMS $v up on $uri in $((SECONDS - t0))s"
  runc "$v" python "$PY" "$HERE/clients/py_hms_client.py" "$uri" --workdir "$w/py"
  if [[ ${HMSTB_SPARK:-1} != 0 ]]; then
    if [[ $v == 4.0 ]]; then  # Spark's built-in Hive 2.3 client calls get_table, gone in 4.0
      runc "$v" spark-hive3 "$PY" "$HERE/clients/spark_client.py" "$uri" "$w/spark" --hive-version 3.1.3
    else
      runc "$v" spark "$PY" "$HERE/clients/spark_client.py" "$uri" "$w/spark"
    fi
  fi
  runc "$v" java-3.1 "$HERE/clients/java_client.sh" 3.1 "$uri" "$w/java31"
  runc "$v" java-4.0 "$HERE/clients/java_client.sh" 4.0 "$uri" "$w/java40"
  cleanup
done
echo "work dir: $WORK (cache: $CACHE, $(du -sh "$CACHE" | cut -f1))"
echo "$pass passed, $fail failed, $xfail skipped"
[[ $fail -eq 0 ]]
