#!/usr/bin/env bash
# GPU readiness check (cooplab/gpu_check.py): builds a ~0.5B Qwen2-shaped model from a config (no
# downloads) and checks CUDA placement, the engine's sampler against generate (stated tolerance),
# bf16, and parallel_training="mp" with both agents on one GPU; prints throughput and memory.
# With the vLLM venv (scripts/install_vllm.sh) it also checks rollout_backend: vllm; without it, a [SKIP] line.
# Without a CUDA device it says so and exits 0 (--require-gpu: exit 3). Arguments go to the module,
# e.g. `scripts/gpu_check.sh --device cuda:1 --new-tokens 64 --json`.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
exec "$PY" -m cooplab.gpu_check "$@"
