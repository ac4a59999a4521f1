#!/usr/bin/env bash
# The GPU benchmark of record (bench/gpu, docs/gpu.md "The benchmark of record"): two agents of each
# real shape (Qwen2.5-0.5B, 1.5B, and 3B when memory and time allow) with random bf16 weights, 16
# prompts x K=8, 256 new tokens, 3 timed steps; CoopLab's phases, the same batch through generate and
# in float32, CoMLRL 1.4.3 on the same script; ratios, MFU, decode roofline; one JSON file.
#
#   scripts/gpu_bench.sh [JSON_PATH] [arguments of python -m bench.gpu]    # default JSON: $OUT/gpu_bench.json
#
# With a .whl/ folder (scripts/fetch_gpu_bench_wheels.sh), each carried wheel whose distribution is
# missing or older here is installed into $SITE (default /tmp/site) first, on PYTHONPATH. The run stops within
# HARD_S seconds of this script's start (default 470: under 8 minutes); no part starts that would not
# end within BUDGET_S (default 420). The JSON is rewritten after every part, so a stopped run keeps
# what it measured. PY picks the Python (default: .venv/bin/python if present, else python3).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${PY:-}" ]; then
  if [ -x .venv/bin/python ]; then PY=.venv/bin/python; else PY=python3; fi
fi
JSON=${1:-${OUT:-.}/gpu_bench.json}
if [ $# -gt 0 ]; then shift; fi
SITE=${SITE:-/tmp/site}
BUDGET_S=${BUDGET_S:-420}
HARD_S=${HARD_S:-470}
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 WANDB_MODE=disabled PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
if compgen -G ".whl/*.whl" >/dev/null; then
  mapfile -t WHEELS < <("$PY" -m bench.gpu.wheels .whl)
  if [ ${#WHEELS[@]} -gt 0 ]; then
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" "${WHEELS[@]}"
  fi
  export PYTHONPATH=$SITE${PYTHONPATH:+:$PYTHONPATH}
fi
"$PY" - <<'PYEOF' || true
from importlib import metadata
names = ["torch", "transformers", "comlrl", "datasets", "wandb", "pydantic", "protobuf", "pyarrow", "huggingface-hub"]
def version(name):
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "missing"
print("versions: " + ", ".join(f"{n} {version(n)}" for n in names), flush=True)
PYEOF
LEFT=$(( HARD_S - SECONDS ))
exec timeout --kill-after=10 "$LEFT" "$PY" -m bench.gpu --budget-s "$(( BUDGET_S - SECONDS ))" --json "$JSON" "$@"
