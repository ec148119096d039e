# Shell functions the test bed's server scripts (hms.sh, kafka.sh, kdc.sh)
# share: each starts a server on loopback in the background, records its pid
# in a file, waits for its port and stops it by that pid file. Sourced, not
# run; the sourcing script sets TB_NAME (its name in log lines) first and
# defines stop WORKDIR, which await_port calls on a timeout.

log() { echo "[$TB_NAME] $*" >&2; }
die() { echo "[$TB_NAME] ERROR: $*" >&2; exit 1; }
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# await_port WHAT PORT PID WORK LOGFILE PIDFILE T0 TIMEOUT waits until PORT
# answers. A server that exits first, or is not listening TIMEOUT seconds
# after T0 (a $SECONDS value), shows the tail of its log and fails the start;
# one that timed out is stopped, so that no half-started JVM is left behind.
await_port() {
  local what=$1 port=$2 pid=$3 work=$4 logf=$5 pidf=$6 t0=$7 timeout=$8
  while ! port_open "$port"; do
    if ! kill -0 "$pid" 2>/dev/null; then
      tail -n 60 "$logf" >&2
      rm -f "$pidf"
      die "$what exited during start-up (log: $logf)"
    fi
    if (( SECONDS - t0 > timeout )); then
      tail -n 60 "$logf" >&2
      stop "$work"
      die "$what not listening on $port after ${timeout}s"
    fi
    sleep 0.2
  done
}

# stop_pidfile WHAT WORK PIDFILE TRIES sends SIGTERM to the pid in PIDFILE,
# waits up to TRIES quarter-seconds for it to go (a JVM flushing its logs
# and stores) and then SIGKILLs it. No pid file is no server: not an error.
stop_pidfile() {
  local what=$1 work=$2 pidf=$3 tries=$4
  [[ -f "$pidf" ]] || { log "no pid file in $work"; return 0; }
  local pid; pid=$(cat "$pidf")
  if kill -0 "$pid" 2>/dev/null; then
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 "$tries"); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
    if kill -0 "$pid" 2>/dev/null; then
      log "pid $pid ignored SIGTERM, sending SIGKILL"
      kill -9 "$pid" 2>/dev/null || true
    fi
  fi
  rm -f "$pidf"
  log "stopped $what in $work"
}
