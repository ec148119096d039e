#!/usr/bin/env bash
# The fleet test (issue 15, e2e/fleet): three real hmsproxy nodes behind a
# real HAProxy (tcp mode, health checks on /readyz), a rolling SIGTERM
# restart and a SIGKILL under a retrying client load, scraped by a real
# Prometheus that runs the dashboard's queries and the alert rules.
# The tools are unpacked from Debian's packages into .cache/tools once,
# without root and without starting any service (the packages' maintainer
# scripts would start a system HAProxy and a Prometheus on :9090):
#   haproxy    with its libraries liblua5.3-0, libopentracing-c-wrapper0,
#              libopentracing1, behind a wrapper setting LD_LIBRARY_PATH;
#   prometheus the server binary (next to deploy-check's promtool).
# A tool on PATH is used first. A tool that cannot be had skips its part
# of the test, and this says why.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
tools=$PWD/.cache/tools
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# fetch DIR PKG...: the packages' .deb files into DIR.
fetch() {
  local dir=$1
  shift
  mkdir -p "$dir"
  (cd "$dir" && apt-get download -q "$@" >/dev/null 2>&1) && return 0
  local sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -q >/dev/null 2>&1 || true
  (cd "$dir" && apt-get download -q "$@" >/dev/null 2>&1)
}

haproxy=$(command -v haproxy || true)
if [ -z "$haproxy" ]; then
  haproxy=$tools/haproxy/haproxy
  if [ ! -x "$haproxy" ]; then
    echo "fleet-check: unpacking haproxy from Debian's packages (once)"
    if fetch "$tmp/h" haproxy liblua5.3-0 libopentracing-c-wrapper0 libopentracing1; then
      for d in "$tmp"/h/*.deb; do dpkg-deb -x "$d" "$tmp/h/pkg"; done
      mkdir -p "$tools/haproxy/lib"
      install -m 0755 "$tmp/h/pkg/usr/sbin/haproxy" "$tools/haproxy/haproxy.bin"
      cp -a "$tmp"/h/pkg/usr/lib/*/*.so* "$tools/haproxy/lib/"
      cat >"$haproxy" <<'EOF'
#!/bin/sh
d=$(dirname "$0")
LD_LIBRARY_PATH="$d/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" exec "$d/haproxy.bin" "$@"
EOF
      chmod 0755 "$haproxy"
    fi
  fi
fi
if ! out=$("$haproxy" -v 2>&1); then
  echo "fleet-check: SKIP the fleet test: no working haproxy (Debian's haproxy package could not be fetched or run: ${out:-not found})"
  exit 0
fi
echo "fleet-check: $(echo "$out" | head -n1)"

prometheus=$(command -v prometheus || true)
if [ -z "$prometheus" ]; then
  prometheus=$tools/prometheus/prometheus
  if [ ! -x "$prometheus" ]; then
    echo "fleet-check: unpacking prometheus from Debian's package (once)"
    if fetch "$tmp/p" prometheus; then
      dpkg-deb -x "$tmp"/p/prometheus_*.deb "$tmp/p/pkg"
      install -D -m 0755 "$tmp/p/pkg/usr/bin/prometheus" "$prometheus"
    fi
  fi
fi
if out=$("$prometheus" --version 2>&1); then
  echo "fleet-check: $(echo "$out" | head -n1)"
else
  echo "fleet-check: SKIP the Prometheus part: no working prometheus (Debian's prometheus package could not be fetched or run)"
  prometheus=""
fi

command -v redis-server >/dev/null 2>&1 || bash scripts/deps.sh >/dev/null
s=$SECONDS
set +e
HMSPROXY_FLEET=1 HMSPROXY_HAPROXY=$haproxy HMSPROXY_PROMETHEUS=$prometheus \
  "$GO" test -count=1 -v -timeout 10m ./e2e/fleet 2>&1 |
  grep -E '^(ok|FAIL|PASS|---|\s+--- (PASS|FAIL|SKIP)|\s+\S+_test\.go:|panic)'
rc=${PIPESTATUS[0]}
set -e
echo "fleet-check: tests took $((SECONDS - s))s"
exit "$rc"
