#!/usr/bin/env bash
# Installs what the unit tests need on a fresh Debian machine, idempotently:
# redis-server (the invalidation-bus tests run a real one on loopback) and the
# MIT Kerberos KDC (the Kerberos tests run one on loopback: testbed/kdc.sh).
set -euo pipefail

need_apt=()
command -v redis-server >/dev/null 2>&1 || need_apt+=(redis-server)
PATH=$PATH:/usr/sbin:/sbin
command -v krb5kdc >/dev/null 2>&1 || need_apt+=(krb5-kdc)
command -v kadmin.local >/dev/null 2>&1 || need_apt+=(krb5-admin-server)
command -v kinit >/dev/null 2>&1 || need_apt+=(krb5-user)

if [ ${#need_apt[@]} -gt 0 ]; then
  echo "deps: installing ${need_apt[*]} from Debian"
  export DEBIAN_FRONTEND=noninteractive
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get install -y -q "${need_apt[@]}" >/dev/null 2>&1 || {
    $sudo_cmd apt-get update -q >/dev/null
    $sudo_cmd apt-get install -y -q "${need_apt[@]}" >/dev/null
  }
  # The Debian package starts a system redis on 6379; the tests start their own.
  (command -v systemctl >/dev/null && $sudo_cmd systemctl stop redis-server >/dev/null 2>&1) || true
  # likewise the system KDC and kadmind: the tests run their own realm
  (command -v systemctl >/dev/null && $sudo_cmd systemctl stop krb5-kdc krb5-admin-server >/dev/null 2>&1) || true
fi
echo "deps: redis-server $(redis-server --version | awk '{print $3}')"
echo "deps: krb5kdc $(command -v krb5kdc)"
