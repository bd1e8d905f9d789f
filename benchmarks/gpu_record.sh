#!/usr/bin/env bash
# Issue 13's GPU checks, as one run on a lent GPU machine (the `device` tool; its image has torch,
# transformers and lightning, not trl): the flight-recorder tests with every model and batch on CUDA
# (plain loop, HF Trainer, Lightning; forward and backward plants; stop; a killed process), then the
# overhead benchmark on the GPU. Writes tests.txt and bench.txt under $OUT (default /tmp/gpu_record).
#   bash benchmarks/gpu_record.sh [REPS] [LARGE_REPS]
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/gpu_record}; mkdir -p "$OUT"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
python3 -c "import torch, transformers, lightning; print('torch', torch.__version__, 'transformers', transformers.__version__, 'lightning', lightning.__version__)" | tee -a "$OUT/gpu.txt"
AUTOPSY_TEST_DEVICE=cuda timeout 240 python3 -m pytest -q -p no:cacheprovider -p no:warnings -k "not trl" \
  tests/test_record_loop.py tests/test_record_frameworks.py 2>&1 | tee "$OUT/tests.txt"
timeout 300 python3 benchmarks/bench_record.py --device cuda --reps "${1:-60}" --large-reps "${2:-20}" --block 10 \
  --large-batch 8x512 --no-bytes 2>&1 | tee "$OUT/bench.txt"
