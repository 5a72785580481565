#!/usr/bin/env bash
# CI's report step: build the deferlab report from the verdicts the test command
# (scripts/test.sh) just recorded, so the claims are not run twice, and gate it
# against the committed baseline. Exit 0: no regression; 1: a claim's verdict or
# a sweep counter changed; 2: bad usage; 3: a step failed. Benchmarks are not run
# (they are opt-in, `--bench`, and never gate). Extra arguments go to
# `deferlab report` (e.g. `--strict`).
set -uo pipefail
cd "$(dirname "$0")/.."
python -m deferlab.reports.cli report \
    --from-results properties/results \
    --baseline reports/baseline.json \
    --profile ci \
    "$@"
rc=$?
if [ -f reports/out/latest ]; then
    echo "deferlab report: reports/out/$(cat reports/out/latest)/report.md (exit $rc)"
fi
exit "$rc"
