#!/usr/bin/env bash
# Run the companion's GPU benchmarks (GEMM, HBM bandwidth, board power, NCCL) once and save their records (JSON with provenance).
# Usage on a machine with an NVIDIA GPU and this repo's environment:
#   bash benchmarks/gpu_suite.sh [OUT_DIR]      (default: data/measurements)
# Each record names the device, driver, CUDA/NCCL/torch versions, date, git commit and command.
set -euo pipefail
out=${1:-data/measurements}
# the environment `make book` builds, unless PYTHON names another interpreter with torch
if [ -z "${PYTHON:-}" ] && [ -x .venv/bin/python ]; then py=.venv/bin/python; else py=${PYTHON:-python}; fi
$py -c "import torch" 2>/dev/null || { echo "gpu_suite.sh: $py has no torch; run make book first or set PYTHON" >&2; exit 1; }
mkdir -p "$out"
$py -m companion env --device cuda
$py -m companion bench gemm --device cuda --save --out "$out"
$py -m companion bench bandwidth --device cuda --save --out "$out"
$py -m companion bench power --save --out "$out"
ngpu=$($py -c "import torch; print(torch.cuda.device_count())")
if [ "$ngpu" -ge 2 ]; then
  $py -m companion bench collectives --procs "$ngpu" --backend nccl --save --record-dir "$out"
fi
echo "records written to $out"
