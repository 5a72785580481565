#!/usr/bin/env bash
# One-shot GPU check for impl/ (run by the lead on a lent CUDA machine, < 4 minutes):
#   1. print torch / CUDA versions;
#   2. the impl property suites with the `device` fixture on cpu AND cuda (`-m "cuda or not cuda"`, bench excluded);
#   3. the impl benchmarks with the producer and ranks on the GPU;
#   4. vLLM's device normalization: its Triton kernel against forward_native (scripts/gpu_norm_check.py; the
#      release from the deferlab cache, or from build/vllm-py.tgz when carried: make it here with
#      `python scripts/gpu_norm_check.py --pack build/vllm-py.tgz`).
# Outputs (logs, junit, benchmark JSON) go to $OUT if set, else ./gpu_check_out.
set -euo pipefail
cd "$(dirname "$0")/.."
# The interpreter: $PYTHON if set, else the first candidate whose torch sees CUDA, else the first with torch.
pick_python() {
  local c
  for c in .venv/bin/python python3 python; do
    if command -v "$c" >/dev/null 2>&1 && "$c" -c "import torch; assert torch.cuda.is_available()" 2>/dev/null; then
      echo "$c"; return
    fi
  done
  for c in .venv/bin/python python3 python; do
    if command -v "$c" >/dev/null 2>&1 && "$c" -c "import torch" 2>/dev/null; then
      echo "$c"; return
    fi
  done
  echo "gpu_check: no Python with torch found (set PYTHON=...)" >&2
  exit 2
}
PY="${PYTHON:-$(pick_python)}"
OUT_DIR="${OUT:-$PWD/gpu_check_out}"
mkdir -p "$OUT_DIR"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
# Claim verdicts are not this check's output: keep them out of $OUT (the device returns at most 8 files).
export DEFERLAB_RESULTS_DIR="${TMPDIR:-/tmp}/deferlab_gpu_check_results"

"$PY" - <<'PYEOF' 2>&1 | tee "$OUT_DIR/versions.txt"
import sys, torch
print("python", sys.version.split()[0])
print("torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available())
if torch.cuda.is_available():
    print("device", torch.cuda.get_device_name(0), "capability", torch.cuda.get_device_capability(0))
for mod in ("numpy", "PIL", "hypothesis", "pytest", "pytest_benchmark"):
    try:
        m = __import__(mod)
        print(mod, getattr(m, "__version__", "?"))
    except ImportError as e:
        print(mod, "MISSING", e)
PYEOF

status=0
# Every CUDA-parametrized test in the suite: the oracle's reciprocal-alpha model
# against real CUDA, fused addcmul, resize ties on the device, property 1 with
# CUDA arithmetic, and eager == deferred (C4) on the GPU.
timeout 150 "$PY" -m pytest -p no:cacheprovider -q -rs --hypothesis-profile=dev \
  -m "cuda and not bench" properties/ \
  --junitxml="$OUT_DIR/junit_cuda.xml" 2>&1 | tee "$OUT_DIR/tests.log" || status=$?

BENCH_DEVICE=$("$PY" -c "import torch; print('cuda' if torch.cuda.is_available() else 'cpu')")
echo "benchmarks on: $BENCH_DEVICE" | tee "$OUT_DIR/bench.log"
DEFERLAB_BENCH_DEVICE="$BENCH_DEVICE" timeout 90 "$PY" -m pytest -p no:cacheprovider -q -s -m bench properties/benchmarks/test_impl.py \
  --benchmark-json="$OUT_DIR/bench.json" 2>&1 | tee -a "$OUT_DIR/bench.log" || status=$((status ? status : $?))

NORM_ARGS=(--out "$OUT_DIR/norm_check.json")
if [ -f build/vllm-py.tgz ]; then NORM_ARGS+=(--vllm-cache build/vllm-py.tgz); fi
timeout 120 "$PY" scripts/gpu_norm_check.py "${NORM_ARGS[@]}" 2>&1 | tee "$OUT_DIR/norm_check.log" || status=$((status ? status : $?))

echo "gpu_check exit status: $status" | tee -a "$OUT_DIR/tests.log"
exit "$status"
