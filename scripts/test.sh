#!/usr/bin/env bash
# Prepare what the test suite needs on a fresh machine, run it, and stop what was started here.
#  - Redis: reuse one answering on 127.0.0.1:6379, else start redis-server on a free port
#    (installing the Debian package when missing and running as root).
#  - Chromium from Debian for the browser tests (installed when missing and running as root).
#  - bubblewrap, the code sandbox's OS boundary (installed when missing and running as root).
#  - PostgreSQL: used by the store tests when one answers on 127.0.0.1:5432 (database `test`).
# Extra arguments go to pytest, e.g. `make test ARGS="tests/db -x"`.
# `--fast` first (`make test-fast`, the inner loop): the unit tier only, with no servers to prepare
# (COOPLAB_TEST_PHASE=fast: no test marked slow, integration, browser or serial, and none of the folders
# and files tests/suite_tiers.py lists: browsers, servers, training runs, process-heavy tests), in
# COOPLAB_TEST_PROCESSES pytest-xdist processes (default 2). On clean clones of 2026-12-07, 2,059 tests
# took 1 min 42 s and 1 min 55 s on 2 cores (2 min 42 s and 3 min 21 s of CPU time).
# The suite runs in two phases. First every test but the `serial` ones, in COOPLAB_TEST_PROCESSES
# pytest processes (pytest-xdist, default 3). Most integration tests wait on workers, browsers,
# heartbeats and timeouts rather than compute: with two processes on two cores the phase used 52% of
# the CPU time it had (user + system 9 min 45 s over 9 min 25 s of wall time), and three processes took
# it from 8 min 17 s to 6 min 40 s; four were no faster (6 min 48 s). Again on clean clones of 2026-12-07
# (3,220 tests): three processes 14 min 02 s, four 14 min 13 s. The processes take a test file at
# a time, heaviest first, and the browser test files (xdist_group "e2e") together, so one process starts
# Chromium and a shared `cooplab up` once for all of them (`--dist loadgroup --no-loadscope-reorder`;
# tests/suite_schedule.py). pytest-xdist's loadfile sent the files with the most tests first, so the
# one-test files that take minutes (browser, worker and training tests) came last and contended with
# each other at the end: the whole suite took 17 min 05 s on a quiet 2-core machine.
# Each process computes on one torch thread (OMP_NUM_THREADS=1, set by tests/conftest.py unless the
# variable is set), as several processes of two threads each on two cores spin more than they compute.
# Then the `serial` tests, in one process with the machine to themselves: fault tests whose worker
# must replace its job process in time (under a second process's load a worker was seen not to start
# the replacement: after a job-process kill, and after a job that ended while the worker reconnected
# to a restarted Redis). COOPLAB_TEST_PROCESSES=1 runs everything in one process.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
fast=""
if [[ "${1:-}" == "--fast" ]]; then
  fast=1
  shift
fi
started_redis_pid=""
apt_updated=""

cleanup() {
  if [[ -n "$started_redis_pid" ]]; then
    kill "$started_redis_pid" 2>/dev/null || true
  fi
}
trap cleanup EXIT

apt_install() {
  if [[ $(id -u) -ne 0 ]] || ! command -v apt-get >/dev/null; then
    echo "test.sh: $* is missing and cannot be installed here (needs root and apt-get)" >&2
    return 1
  fi
  if [[ -z "$apt_updated" ]]; then
    apt-get update -qq >/dev/null
    apt_updated=1
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

redis_answers() {  # url
  "$PY" - "$1" <<'PYEOF' >/dev/null 2>&1
import sys, redis
redis.Redis.from_url(sys.argv[1], socket_connect_timeout=1).ping()
PYEOF
}

free_port() {
  "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
export COOPLAB_TEST_ARTIFACTS="${COOPLAB_TEST_ARTIFACTS:-$PWD/test-artifacts}"
mkdir -p "$COOPLAB_TEST_ARTIFACTS"
# Compiled bytecode is written (next to the sources, in the __pycache__ folders git ignores), also where
# PYTHONDONTWRITEBYTECODE is set: otherwise every pytest process compiles and assertion-rewrites each test
# module again (collecting tests/engine, app, db and jobs took 22 s of CPU time instead of 12 s), and every
# worker, job and CLI process the tests start compiles the project's modules it imports. Not a
# PYTHONPYCACHEPREFIX: Python then ignores the bytecode pip compiled for the installed packages, and a
# fresh clone's first processes compiled torch, transformers and the rest again (+13 s of CPU each).
unset PYTHONDONTWRITEBYTECODE

# --- the unit tier (--fast): no Redis, Chromium or PostgreSQL ------------------------------------
if [[ -n "$fast" ]]; then
  bash scripts/ensure-bubblewrap.sh --required >/dev/null
  processes=${COOPLAB_TEST_PROCESSES:-2}
  if [[ "$processes" == 1 ]]; then
    COOPLAB_TEST_PHASE=fast exec "$PY" -m pytest "$@"
  fi
  COOPLAB_TEST_PHASE=fast exec "$PY" -m pytest -n "$processes" --dist loadfile "$@"
fi

# --- Redis -----------------------------------------------------------------------------------
if [[ -z "${COOPLAB_TEST_REDIS_URL:-}" ]]; then
  if redis_answers "redis://127.0.0.1:6379/0"; then
    export COOPLAB_TEST_REDIS_URL="redis://127.0.0.1:6379"
  else
    command -v redis-server >/dev/null || apt_install redis-server
    port=$(free_port)
    redis_dir=$(mktemp -d)
    redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --dir "$redis_dir" \
      --daemonize no >"$redis_dir/redis.log" 2>&1 &
    started_redis_pid=$!
    export COOPLAB_TEST_REDIS_URL="redis://127.0.0.1:$port"
    for _ in $(seq 50); do redis_answers "$COOPLAB_TEST_REDIS_URL/0" && break; sleep 0.1; done
    redis_answers "$COOPLAB_TEST_REDIS_URL/0" || { echo "test.sh: redis-server did not start" >&2; exit 1; }
    echo "test.sh: started redis-server on port $port (pid $started_redis_pid)"
  fi
fi
echo "test.sh: Redis at $COOPLAB_TEST_REDIS_URL"

# --- bubblewrap: the code sandbox's OS boundary ------------------------------------------------
bash scripts/ensure-bubblewrap.sh --required
echo "test.sh: bubblewrap at $(command -v bwrap)"

# --- Chromium --------------------------------------------------------------------------------
if [[ -z "${COOPLAB_CHROMIUM:-}" ]]; then
  command -v chromium >/dev/null || apt_install chromium || true
  if command -v chromium >/dev/null; then
    export COOPLAB_CHROMIUM="$(command -v chromium)"
  fi
fi
echo "test.sh: Chromium at ${COOPLAB_CHROMIUM:-<none>}"

# --- PostgreSQL (optional) -------------------------------------------------------------------
if [[ -z "${COOPLAB_TEST_POSTGRES_URL:-}" ]]; then
  pg_url="postgresql+psycopg2://postgres@127.0.0.1:5432/test"
  if "$PY" - "$pg_url" <<'PYEOF' >/dev/null 2>&1
import sys, sqlalchemy
engine = sqlalchemy.create_engine(sys.argv[1], connect_args={"connect_timeout": 2})
with engine.connect() as conn:
    conn.execute(sqlalchemy.text("select 1"))
PYEOF
  then
    export COOPLAB_TEST_POSTGRES_URL="$pg_url"
  fi
fi
echo "test.sh: PostgreSQL at ${COOPLAB_TEST_POSTGRES_URL:-<none: store tests run on SQLite only>}"

processes=${COOPLAB_TEST_PROCESSES:-3}
set +e
if [[ "$processes" == 1 ]]; then
  "$PY" -m pytest "$@"
  exit $?
fi
COOPLAB_TEST_PHASE=parallel "$PY" -m pytest -n "$processes" --dist loadgroup --no-loadscope-reorder "$@"
parallel_status=$?
if [[ $parallel_status -eq 2 || $parallel_status -eq 3 || $parallel_status -eq 4 ]]; then
  exit $parallel_status  # interrupted, an internal error or a usage error: no second phase
fi
echo "test.sh: the serial tests, in one process"
COOPLAB_TEST_PHASE=serial "$PY" -m pytest "$@"
serial_status=$?
set -e
# 5 means "no tests collected": fine for one phase (a selection may hold no serial test), not for both.
if [[ $parallel_status -eq 5 && $serial_status -eq 5 ]]; then exit 5; fi
for status in $parallel_status $serial_status; do
  if [[ $status -ne 0 && $status -ne 5 ]]; then exit $status; fi
done
exit 0
