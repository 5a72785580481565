#!/usr/bin/env bash
# The same versions matrix on this machine's pool and through a local Ray cluster, side by side in one run:
# verdicts must be identical, and the Ray run's wall time (its cluster's start included) is printed beside the
# local one with their ratio (the cluster issue's number: at most 1.15).
#   bash scripts/cluster_compare.sh                          # 0.5.22 and 0.5.23, Kimi-K3, claims C4,C9,C10,C13
#   bash scripts/cluster_compare.sh 0.5.21 0.5.22 --claims C9  # any versions arguments
# Needs the cluster extra (Ray). Exit 0: identical verdicts; 1: they differ; other: a run failed.
set -uo pipefail
cd "$(dirname "$0")/.."
args=("$@")
if [[ ${#args[@]} -eq 0 ]]; then
    args=(0.5.22 0.5.23 --claims C4,C9,C10,C13)
fi
out=reports/out/cluster-compare
rm -rf "$out"
mkdir -p "$out"
run() {  # run NAME [extra args]: one versions run, its wall seconds into $out/NAME.seconds
    local name=$1; shift
    local t0; t0=$(python -c 'import time; print(time.time())')
    python -m deferlab.reports.cli versions --profile ci --baseline none --out "$out/$name" "${args[@]}" "$@" \
        2> "$out/$name.log"
    local rc=$?
    python -c "import time; print(time.time() - $t0)" > "$out/$name.seconds"
    return $rc
}
run local; rc_local=$?
run ray --cluster local; rc_ray=$?
python - "$out" "$rc_local" "$rc_ray" <<'PY'
import json, sys
from pathlib import Path
out, rcs = Path(sys.argv[1]), sys.argv[2:]
docs = {n: json.loads((out / n / "versions.json").read_text()) for n in ("local", "ray")}
secs = {n: float((out / f"{n}.seconds").read_text()) for n in docs}
same = docs["local"]["verdicts"] == docs["ray"]["verdicts"]
print(f"local pool: {secs['local']:.1f} s (exit {rcs[0]}); local Ray: {secs['ray']:.1f} s (exit {rcs[1]}), "
      f"ratio {secs['ray'] / secs['local']:.3f}; verdicts identical: {same}")
(out / "summary.json").write_text(json.dumps({"seconds": secs, "exit": rcs, "identical": same}, indent=1) + "\n")
sys.exit(0 if same else 1)
PY
