#!/usr/bin/env bash
# Checks what deploy/ ships (issue 15), in seconds once the tools are cached:
#   - the alert rules: promtool check rules, promtool test rules, and the
#     chart's copy identical to deploy/prometheus/;
#   - the Helm chart: helm lint --strict, helm template with the defaults
#     and with every optional part on, the rendered manifests handed to
#     cmd/hmsproxy's TestRenderedChart;
#   - the systemd unit: systemd-analyze verify, where it can run;
#   - the Dockerfile's static build: CGO_ENABLED=0 go build gives a binary
#     with no dynamic loader (the Dockerfile's own properties are checked by
#     cmd/hmsproxy's TestDockerfile; Debian packages no hadolint).
# Tools are installed into .cache/tools/ once, idempotently, helm under a
# lock (make test's background fetch builds it while the unit tests run):
#   helm     built from the Go module proxy (HELM_VERSION), about 2 minutes;
#   promtool from Debian's prometheus package, unpacked rather than
#            installed: the package's maintainer script would start a
#            Prometheus server on :9090. A promtool on PATH is used first.
#   scripts/deploy-check.sh --prepare   only build helm, and the static
#   binary into the Go build cache (no apt-get: the background build must
#   not take apt's lock from scripts/deps.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
HELM_VERSION=${HELM_VERSION:-v3.21.4}
tools=$PWD/.cache/tools
t0=$SECONDS
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tools"
exec 9>"$tools/.lock"
if ! flock -n 9; then
  echo "deploy-check: waiting for the background helm build (.cache/prefetch.log)"
  flock -w 900 9 || { echo "deploy-check: the background helm build held its lock for 15 minutes" >&2; exit 1; }
fi

helm=$tools/helm-$HELM_VERSION/helm
if [ ! -x "$helm" ]; then
  echo "deploy-check: building helm $HELM_VERSION from the Go module proxy (once)"
  s=$SECONDS
  GOBIN=$tools/helm-$HELM_VERSION CGO_ENABLED=0 "$GO" install "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
  echo "deploy-check: helm built in $((SECONDS - s))s"
fi
flock -u 9
if [ "${1:-}" = --prepare ]; then
  # The static build below compiles every package again (CGO_ENABLED=0
  # and -trimpath change every package's build key): done here, it is a
  # cache hit when deploy-check runs.
  CGO_ENABLED=0 "$GO" build -trimpath -o "$tmp/hmsproxy" ./cmd/hmsproxy
  exit 0
fi

promtool=$(command -v promtool || true)
if [ -z "$promtool" ]; then
  promtool=$tools/prometheus/promtool
  if [ ! -x "$promtool" ]; then
    echo "deploy-check: fetching promtool from Debian's prometheus package (once)"
    sudo_cmd=""
    [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
    (cd "$tmp" && apt-get download -q prometheus >/dev/null 2>&1) || {
      $sudo_cmd apt-get update -q >/dev/null
      (cd "$tmp" && apt-get download -q prometheus >/dev/null 2>&1)
    }
    dpkg-deb -x "$tmp"/prometheus_*.deb "$tmp/pkg"
    install -D -m 0755 "$tmp/pkg/usr/bin/promtool" "$promtool"
  fi
fi
echo "deploy-check: $("$helm" version --short), $("$promtool" --version 2>&1 | head -n1)"

# Alert rules.
cmp deploy/prometheus/hmsproxy-alerts.yaml deploy/helm/hmsproxy/files/hmsproxy-alerts.yaml || {
  echo "deploy-check: deploy/helm/hmsproxy/files/hmsproxy-alerts.yaml differs from deploy/prometheus/hmsproxy-alerts.yaml; copy it over" >&2
  exit 1
}
(cd deploy/prometheus && "$promtool" check rules hmsproxy-alerts.yaml && "$promtool" test rules hmsproxy-alerts_test.yaml)

# Helm chart: the defaults, then everything optional on with an existing
# Secret, on a cluster old enough to lack the preStop sleep action.
chart=deploy/helm/hmsproxy
all_on=(--set serviceMonitor.enabled=true --set prometheusRule.enabled=true
  --set secret.create=false --set secret.existingSecret=hmsproxy-secrets)
"$helm" lint --strict "$chart"
"$helm" lint --strict "$chart" "${all_on[@]}"
"$helm" template hmsproxy "$chart" --kube-version 1.31.0 >"$tmp/default.yaml"
"$helm" template hmsproxy "$chart" --kube-version 1.29.0 "${all_on[@]}" >"$tmp/all-on.yaml"
grep -q 'sleep:' "$tmp/default.yaml" || { echo "deploy-check: no preStop sleep on Kubernetes 1.31" >&2; exit 1; }
! grep -q 'sleep:' "$tmp/all-on.yaml" || { echo "deploy-check: a preStop sleep on Kubernetes 1.29, which lacks it" >&2; exit 1; }
HMSPROXY_DEPLOY_MANIFESTS=$tmp/default.yaml,$tmp/all-on.yaml \
  "$GO" test -count=1 ./cmd/hmsproxy -run 'TestRenderedChart|TestDockerfile|TestSystemdUnit|TestChartValues'

# The Dockerfile's build command gives a static binary.
CGO_ENABLED=0 "$GO" build -trimpath -o "$tmp/hmsproxy" ./cmd/hmsproxy
if ldd "$tmp/hmsproxy" >/dev/null 2>&1; then
  echo "deploy-check: CGO_ENABLED=0 build of cmd/hmsproxy is dynamically linked" >&2
  exit 1
fi

# systemd unit. verify exits 0 on unknown keys and bad values (it only
# warns), so any output fails. ExecStart must name an executable that
# exists: the static binary just built stands in for /usr/local/bin/hmsproxy.
if ! command -v systemd-analyze >/dev/null 2>&1; then
  echo "deploy-check: SKIP systemd-analyze verify: no systemd-analyze (Debian's systemd package)"
else
  mkdir -p "$tmp/unit"
  printf '[Service]\nExecStart=/bin/true\n' >"$tmp/unit/probe.service"
  if ! systemd-analyze verify "$tmp/unit/probe.service" >/dev/null 2>&1; then
    echo "deploy-check: SKIP systemd-analyze verify: it cannot run here (a trivial unit fails too)"
  else
    sed "s|/usr/local/bin/hmsproxy|$tmp/hmsproxy|" deploy/systemd/hmsproxy.service >"$tmp/unit/hmsproxy.service"
    out=$(systemd-analyze verify "$tmp/unit/hmsproxy.service" 2>&1) || true
    if [ -n "$out" ]; then
      echo "deploy-check: systemd-analyze verify deploy/systemd/hmsproxy.service:" >&2
      echo "$out" >&2
      exit 1
    fi
    echo "deploy-check: systemd-analyze verify: ok"
  fi
fi
echo "deploy-check: ok in $((SECONDS - t0))s"
