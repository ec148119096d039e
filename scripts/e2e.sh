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
s=$SECONDS
set +e
HMSPROXY_E2E=$versions go test -count=1 -v -timeout 45m ./e2e 2>&1 |
  grep -E '^(e2e:|ok|FAIL|PASS|---|\s+--- (PASS|FAIL)|\s+\S+_test\.go:|panic)'
rc=${PIPESTATUS[0]}
set -e
echo "e2e: tests took $((SECONDS - s))s; total $((SECONDS - t0))s"
# A short twin per version, one node and a fleet of three: at least
# 2,000 operations each (make twin runs ten minutes per version), four
# sessions: on 4.0 eight stall longer on its lock tables (2,000 took 5 min).
s=$SECONDS
set +e
TWIN_VERSIONS=$versions TWIN_SECONDS=${TWIN_SECONDS:-1} TWIN_OPS=${TWIN_OPS:-2000} TWIN_NODES=${TWIN_NODES:-1,3} TWIN_SESSIONS=${TWIN_SESSIONS:-4} \
  TWIN_SHRINK_SECONDS=${TWIN_SHRINK_SECONDS:-120} bash scripts/twin.sh |
  grep -a -E '^(twin: (HMS|[0-9]+ operations|difference|minimised|  |not)|--- FAIL|    twin_test|ok|FAIL|panic)'
trc=${PIPESTATUS[0]}
set -e
echo "e2e: the twin took $((SECONDS - s))s"
if [[ $rc -eq 0 ]]; then rc=$trc; fi
exit "$rc"
