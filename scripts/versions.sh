#!/usr/bin/env bash
# The claims on real SGLang releases, gated on the committed versions baseline.
#   bash scripts/versions.sh --newest     # CI: the newest release on the index (about 2 minutes)
#   bash scripts/versions.sh              # the full matrix 0.5.17 .. newest (about 10 minutes on 2 cores)
# Exit 0: no verdict changed; 1: a release's verdict changed against reports/versions_baseline.json;
# 2: bad usage (e.g. the index cannot be listed); 3: a release could not be loaded or a claim test errored.
set -uo pipefail
cd "$(dirname "$0")/.."
python -m deferlab.reports.cli versions --profile ci --out reports/out/versions-latest \
    --baseline reports/versions_baseline.json "$@"
