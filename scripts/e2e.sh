#!/usr/bin/env bash
# End-to-end tests against real Hive Metastores with real clients:
# fetches what they need into the test-bed cache (idempotent, fast when
# warm), then runs the e2e Go tests, which start and stop the servers.
#   scripts/e2e.sh [VERSIONS]     default 2.3,3.1,4.0
set -euo pipefail
cd "$(dirname "$0")/.."
versions=${1:-${HMSPROXY_E2E_VERSIONS:-2.3,3.1,4.0}}
t0=$SECONDS
bash scripts/deps.sh >/dev/null
bash scripts/prefetch.sh wait
for v in ${versions//,/ } clients; do
  s=$SECONDS
  bash testbed/hms.sh fetch "$v"
  echo "e2e: fetched $v in $((SECONDS - s))s"
done
s=$SECONDS
bash testbed/kafka.sh fetch
bash testbed/clients/atlas_reader.sh --build
echo "e2e: fetched Kafka and the Atlas reader in $((SECONDS - s))s"
echo "e2e: dependencies ready in $((SECONDS - t0))s"
# Every server the tests start (metastores, KDCs, brokers) lives in this
# run's own temporary directory, and whatever is still running there when
# the script ends is stopped: a test binary that dies (a timeout's panic
# skips its cleanup) must not leave a gigabyte JVM per metastore behind
# for the next run. A failed run keeps the directory's logs.
run_tmp=$(mktemp -d "${TMPDIR:-/tmp}/hmsproxy-e2e-run-XXXXXX")
export TMPDIR=$run_tmp
rc=1
stop_left() {
  local p
  while IFS= read -r p; do
    case $p in
      */hms.pid) bash testbed/hms.sh stop "${p%/hms.pid}" ;;
      */kdc.pid) bash testbed/kdc.sh stop "${p%/kdc.pid}" ;;
      */kafka.pid) bash testbed/kafka.sh stop "${p%/kafka.pid}" ;;
    esac
  done < <(find "$run_tmp" -maxdepth 4 \( -name hms.pid -o -name kdc.pid -o -name kafka.pid \) 2>/dev/null)
  if [[ $rc -eq 0 ]]; then rm -rf "$run_tmp"; else echo "e2e: logs kept in $run_tmp"; fi
}
trap stop_left EXIT
s=$SECONDS
set +e
HMSPROXY_E2E=$versions go test -count=1 -v -parallel 3 -timeout 45m ./e2e 2>&1 |
  grep -E '^(e2e:|ok|FAIL|PASS|---|\s+--- (PASS|FAIL)|\s+\S+_test\.go:|panic)'
rc=${PIPESTATUS[0]}
set -e
echo "e2e: tests took $((SECONDS - s))s; total $((SECONDS - t0))s"
# A short twin per version, at least 2,000 operations each (make twin
# runs ten minutes per version, each with one node and a fleet): 2.3 and
# 3.1 with a fleet of three, which takes the single node's paths and the
# bus's; 4.0 with one node. Four sessions each, to keep within the time
# budget (docs/testing.md has why 4.0's lock calls once made its run take
# minutes).
s=$SECONDS
set +e
twin_short() { # VERSIONS NODES
  TWIN_VERSIONS=$1 TWIN_SECONDS=${TWIN_SECONDS:-1} TWIN_OPS=${TWIN_OPS:-2000} TWIN_NODES=${TWIN_NODES:-$2} TWIN_SESSIONS=${TWIN_SESSIONS:-4} \
    TWIN_SHRINK_SECONDS=${TWIN_SHRINK_SECONDS:-120} bash scripts/twin.sh |
    grep -a -E '^(twin: (HMS|[0-9]+ operations|difference|minimised|  |not)|--- FAIL|    twin_test|ok|FAIL|panic)'
  return "${PIPESTATUS[0]}"
}
fleet=$(tr ',' '\n' <<<"$versions" | grep -v '^4\.0$' | paste -sd, -)
# The two runs go side by side (each metastore has its own port, each
# run its own Redis and nodes): a run keeps about one core busy, most of
# it in its metastore. Each one's lines are printed when it ends.
trc=0 pids=() logs=()
if [[ -n $fleet ]]; then
  logs+=("$run_tmp/twin-fleet.log"); twin_short "$fleet" 3 > "${logs[-1]}" 2>&1 & pids+=($!)
fi
if [[ ,$versions, == *,4.0,* ]]; then
  logs+=("$run_tmp/twin-4.0.log"); twin_short 4.0 1 > "${logs[-1]}" 2>&1 & pids+=($!)
fi
for i in "${!pids[@]}"; do
  wait "${pids[$i]}" || trc=$?
  cat "${logs[$i]}"
done
set -e
echo "e2e: the twin took $((SECONDS - s))s"
if [[ $rc -eq 0 ]]; then rc=$trc; fi
exit "$rc"
