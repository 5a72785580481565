#!/usr/bin/env bash
# CI's report step: build the deferlab report from the verdicts the test command
# (scripts/test.sh) just recorded, so the property suite is not run twice, and
# gate it against the committed baseline. Exit 0: no regression; 1: a claim's
# verdict, a sweep counter or a benchmark ratio changed; 2: bad usage.
# Extra arguments go to `deferlab report` (e.g. drop `--skip bench` by passing
# nothing else and editing here, or add `--bench-arg=...`).
set -uo pipefail
cd "$(dirname "$0")/.."
python -m deferlab.reports.cli report \
    --from-results properties/results \
    --baseline reports/baseline.json \
    --profile ci \
    --skip bench \
    "$@"
rc=$?
if [ -f reports/out/latest ]; then
    echo "deferlab report: reports/out/$(cat reports/out/latest)/report.md (exit $rc)"
fi
exit "$rc"
