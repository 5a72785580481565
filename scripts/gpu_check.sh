#!/usr/bin/env bash
# One-shot GPU check for impl/ (run by the lead on a lent CUDA machine, < 4 minutes):
#   1. print torch / CUDA versions;
#   2. the impl property suites with the `device` fixture on cpu AND cuda (`-m "cuda or not cuda"`, bench excluded);
#   3. the impl benchmarks with the producer and ranks on the GPU.
# Outputs (logs, junit, benchmark JSON) go to $OUT if set, else ./gpu_check_out.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-}"
if [ -z "$PY" ]; then
  if [ -x .venv/bin/python ] && .venv/bin/python -c "import torch; assert torch.cuda.is_available()" 2>/dev/null; then
    PY=.venv/bin/python
  else
    PY=python3
  fi
fi
OUT_DIR="${OUT:-$PWD/gpu_check_out}"
mkdir -p "$OUT_DIR"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export DEFERLAB_RESULTS_DIR="$OUT_DIR/results"

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
timeout 150 "$PY" -m pytest -p no:cacheprovider -q -rs --hypothesis-profile=dev \
  -m "(cuda or not cuda) and not bench" -k "impl" properties/test_impl_*.py \
  --junitxml="$OUT_DIR/junit_impl.xml" 2>&1 | tee "$OUT_DIR/tests.log" || status=$?

DEFERLAB_BENCH_DEVICE=cuda timeout 70 "$PY" -m pytest -p no:cacheprovider -q -s -m bench properties/test_bench_impl.py \
  --benchmark-json="$OUT_DIR/bench.json" 2>&1 | tee "$OUT_DIR/bench.log" || status=$((status ? status : $?))

echo "gpu_check exit status: $status" | tee -a "$OUT_DIR/tests.log"
exit "$status"
