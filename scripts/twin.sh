#!/usr/bin/env bash
# The twin (e2e/twin): random sequences of HMS calls from several
# sessions, through hmsproxy and straight to real metastores, every
# reply compared. Fetches the metastores it needs, then runs.
#   scripts/twin.sh                 TWIN_SECONDS (600), TWIN_VERSIONS (2.3,3.1,4.0),
#                                   TWIN_NODES (1; "1,3" runs each), TWIN_SEED, TWIN_OPS,
#                                   TWIN_FEDERATION (none; "manual,prefixed" adds a
#                                   second metastore per version behind the fleet)
# It prints its seed per run, a summary by method and generator, any
# difference and its minimised sequence (a test file in e2e/twin), and
# last "twin: <operations> operations, <differences> differences".
set -euo pipefail
cd "$(dirname "$0")/.."
export TWIN_SECONDS=${TWIN_SECONDS:-600}
export TWIN_VERSIONS=${TWIN_VERSIONS:-2.3,3.1,4.0}
export TWIN_NODES=${TWIN_NODES:-1}
bash scripts/deps.sh >/dev/null
for v in ${TWIN_VERSIONS//,/ }; do bash testbed/hms.sh fetch "$v"; done
# Each run may spend up to TWIN_SHRINK_SECONDS (300) per difference
# class minimising it, after its TWIN_SECONDS.
set +e
${GO:-go} test -count=1 -v -timeout 0 -run 'Test' ./e2e/twin 2>&1 |
  grep -a -v -E '^\{"time"|^=== (RUN|PAUSE|CONT)|^\s*$|hmsproxy is ready|Point clients|hive.metastore.uris|e.g. go run|Admin API|/metrics|curl -X'
rc=${PIPESTATUS[0]}
exit "$rc"
