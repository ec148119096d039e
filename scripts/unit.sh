#!/usr/bin/env bash
# Unit tests, every package under the race detector. CI shows only the
# end of a long log, so when a package fails this prints, last, what
# failed and, for a package that hit its timeout, which tests were still
# running and where the test goroutines were waiting (the whole output
# stays in .cache/unit.log).
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
mkdir -p .cache
log=.cache/unit.log
set +e
"$GO" test -count=1 -race ./... 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
set -e
if ((rc != 0)); then
  echo "=== unit: what failed (whole output: $log)"
  grep -E '^(--- FAIL|FAIL|panic: )' "$log" | head -40 || true
  grep -E -A6 '^\s+running tests:' "$log" | grep -E '^\s+(running tests:|Test)' | head -20 || true
  # Goroutines with a frame in a test file, those frames only: where a
  # hung test waits.
  awk '
    /^goroutine [0-9]+ \[/ { head = $0; prev = ""; next }
    /_test\.go:[0-9]+/ && head != "" { if (head != "-") { print head; head = "-" } print "  " prev; print "  " $0; next }
    NF == 0 { head = "" }
    { prev = $0 }
  ' "$log" | head -150 || true # head may cut awk off (SIGPIPE)
fi
exit "$rc"
