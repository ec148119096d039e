#!/usr/bin/env bash
# Installs what the status-page browser test (admin) needs on a
# fresh Debian machine, idempotently: Debian's chromium and chromium-driver
# (run headless) and a font. Set HMSPROXY_SKIP_BROWSER=1 to skip that test instead.
set -euo pipefail

need_apt=()
command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)
command -v chromedriver >/dev/null 2>&1 || need_apt+=(chromium-driver)
# Without any font the screenshot shows boxes instead of text.
[ -n "$(fc-list 2>/dev/null | head -n1)" ] || need_apt+=(fonts-dejavu-core)

if [ ${#need_apt[@]} -gt 0 ]; then
  echo "browser-deps: installing ${need_apt[*]} from Debian"
  export DEBIAN_FRONTEND=noninteractive
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get install -y -q --no-install-recommends "${need_apt[@]}" >/dev/null 2>&1 || {
    $sudo_cmd apt-get update -q >/dev/null
    $sudo_cmd apt-get install -y -q --no-install-recommends "${need_apt[@]}" >/dev/null
  }
fi
echo "browser-deps: $(chromium --version 2>/dev/null | head -n1)"
