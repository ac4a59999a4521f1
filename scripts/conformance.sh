#!/usr/bin/env bash
# CoMLRL 1.4.3's own test suite against CoopLab's compatibility layer (engine.comlrl): downloads the
# sdist with pip (the package index must be reachable; the run fails with the reason when it is not),
# rewrites only its `comlrl` imports, runs its tests and prints passed/failed per test file.
# Exit status: 0 every outcome as listed in tests/conformance/scope.py, 1 not, 2 could not run.
# Extra arguments go to the runner, e.g. `make conformance ARGS="--list"` or `ARGS="--sdist comlrl-1.4.3.tar.gz"`.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
# CoMLRL's tests import its own requirements; the one CoopLab's dev install lacks (wandb, an optional extra
# here: test_actor_critic.py imports it at the top) is installed for the run.
"$PY" -c "import wandb" 2>/dev/null || "$PY" -m pip install -q "wandb>=0.15.0"
exec "$PY" -m tests.conformance.runner "$@"
