#!/usr/bin/env bash
# GPU check for the baselines trainer (one H200, PyTorch + transformers preinstalled,
# no internet). Target: under 8 minutes. Rollouts use vLLM when it is importable
# (rollout.engine=vllm), else the hf engine; ENGINE=hf|vllm forces one.
#
#   bash benchmarks/gpu_check.sh            # on the GPU machine
#   bash benchmarks/gpu_check.sh --dry-run  # anywhere: CPU, tiny model, no installs
#   MODEL_PATH=DIR ...                      # start from a local model instead of SFT
#   bash benchmarks/gpu_check.sh --search   # the Search recipe: SFT + 20 PPO-EWMA steps on
#                                           # Search-v2, held-out success, tok/s, peak memory
#                                           # (its own call: under the device's 10-minute limit)
#
# Installs agentgym from this working tree with --no-deps, plus small wheels carried in
# benchmarks/wheels/ (gitignored) with --no-index --find-links. Prepare them on a machine
# with internet, for the GPU machine's Python version:
#   pip download --only-binary=:all: --python-version 3.11 -d benchmarks/wheels \
#       gymnasium farama-notifications cloudpickle tenacity jsonschema jsonschema-specifications \
#       referencing rpds-py attrs tantivy typer rich pyyaml
# Never installs torch (the machine's own build is used).
set -euo pipefail
cd "$(dirname "$0")/.."
DRY_RUN=0
MODE=()
for arg in "$@"; do
  case "$arg" in
    --dry-run) DRY_RUN=1 ;;
    --search) MODE=(--search --search-steps "${SEARCH_STEPS:-20}") ;;
    *) echo "usage: $0 [--dry-run] [--search]" >&2; exit 2 ;;
  esac
done
PY="${PYTHON:-python}"
if [ -x .venv/bin/python ] && [ "$DRY_RUN" = 1 ]; then PY=.venv/bin/python; fi
RUN_DIR="${RUN_DIR:-$(mktemp -d)/gpu_check}"

if [ "$DRY_RUN" = 0 ]; then
  "$PY" -c "import torch, transformers; assert torch.cuda.is_available(), 'no CUDA device'; print('torch', torch.__version__, 'transformers', transformers.__version__, torch.cuda.get_device_name(0))"
  if [ -d benchmarks/wheels ] && ls benchmarks/wheels/*.whl >/dev/null 2>&1; then
    # Only what is missing; --no-deps keeps pip from reaching for torch or the network.
    "$PY" -m pip install --quiet --no-index --find-links benchmarks/wheels --no-deps benchmarks/wheels/*.whl
  else
    echo "gpu_check: benchmarks/wheels/ is empty; assuming gymnasium, tenacity, jsonschema, tantivy, typer, rich, pyyaml are installed"
  fi
  "$PY" -m pip install --quiet --no-index --no-deps --no-build-isolation -e . 2>/dev/null \
    || echo "gpu_check: editable install unavailable; using PYTHONPATH"
  export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
  exec timeout 570 "$PY" -m baselines.gpu_check --run-dir "$RUN_DIR" ${ENGINE:+--engine "$ENGINE"} ${MODEL_PATH:+--model "$MODEL_PATH"} "${MODE[@]}"
else
  export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
  exec timeout 600 "$PY" -m baselines.gpu_check --dry-run --run-dir "$RUN_DIR" ${ENGINE:+--engine "$ENGINE"} ${MODEL_PATH:+--model "$MODEL_PATH"} "${MODE[@]}"
fi
