#!/usr/bin/env bash
# Prepares .whl/ (git-ignored) for scripts/gpu_bench.sh on a GPU machine that has no network: CoMLRL
# 1.4.3 (pure Python) and what the benchmark imports that the machine's image lacks (its package list:
# /work/.library/device/KINDS.md): CoMLRL's load-time imports (datasets, wandb and theirs) and the
# engine's config schema (pydantic). Wheels for Python 3.12 on manylinux x86_64, one version each,
# pinned to the versions the benchmark ran with here. gpu_bench.sh installs a wheel there only when the
# machine lacks its distribution or has an older version. Run it where pip reaches the package index.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${PY:-}" ]; then
  if [ -x .venv/bin/python ]; then PY=.venv/bin/python; else PY=python3; fi
fi
DEST=${DEST:-.whl}
WHEELS=(
  comlrl==1.4.3
  # CoMLRL imports datasets and wandb when it loads
  datasets==4.8.5 dill==0.4.1 multiprocess==0.70.19
  wandb==0.31.0 platformdirs==4.14.9 protobuf==7.36.2 click==8.5.1 googleapis-common-protos==1.76.0
  opentelemetry-api==1.45.2 opentelemetry-sdk==1.45.2 opentelemetry-semantic-conventions==0.66b2
  opentelemetry-proto==1.45.2 opentelemetry-exporter-otlp-proto-http==1.45.2
  opentelemetry-exporter-otlp-proto-common==1.45.2 opentelemetry-exporter-http-transport==0.66b2
  opentelemetry-exporter-otlp-common==0.66b2
  # the engine's config schema
  pydantic==2.14.4 pydantic-core==2.50.5 annotated-types==0.8.0 typing-inspection==0.4.5 typing-extensions==4.16.0
)
mkdir -p "$DEST"
rm -f "$DEST"/*.whl  # one version of each: two stop the whole install
"$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  -d "$DEST" "${WHEELS[@]}"
git check-ignore -q "$DEST" || echo "warning: $DEST is not git-ignored: add /$DEST/ to .gitignore" >&2
echo "$(ls "$DEST"/*.whl | wc -l) wheels, $(du -sh "$DEST" | cut -f1) in $DEST (carry it: run(..., carry=[\"$DEST\"]))"
