#!/usr/bin/env bash
# The claims on real engine releases, gated on the committed versions baseline.
#   bash scripts/versions.sh --newest     # CI: the newest SGLang release, the newest vLLM release with a
#                                         # Kimi-K3 image path (>= 0.27.0) and the newest LMDeploy (>= 0.14.0), every
#                                         # model family of the registry (--model all: each engine loaded once)
#   bash scripts/versions.sh              # the full SGLang matrix 0.5.17 .. newest (about 10 minutes on 2 cores)
#   bash scripts/versions.sh --vllm       # ... and every vLLM release from 0.27.0 (one wheel download each)
# --newest adds --vllm and --lmdeploy unless given: CI gates on their newest releases as on SGLang's; and --model all
# unless --model is given (families.md beside versions.md: the families x engines table).
# --strict: a failing claim failing in a new way (a new failure signature) regresses too (CI's gate).
# Exit 0: no verdict changed; 1: a release's verdict changed against reports/versions_baseline.json;
# 2: bad usage (e.g. the index cannot be listed); 3: a release could not be loaded or a claim test errored.
set -uo pipefail
cd "$(dirname "$0")/.."
args=("$@")
if [[ " $* " == *" --newest "* && " $* " != *" --vllm"* ]]; then
    args+=(--vllm)
fi
if [[ " $* " == *" --newest "* && " $* " != *" --lmdeploy"* ]]; then
    args+=(--lmdeploy)
fi
if [[ " $* " == *" --newest "* && " $* " != *" --model"* ]]; then
    args+=(--model all)
fi
python -m deferlab.reports.cli versions --profile ci --strict --out reports/out/versions-latest \
    --baseline reports/versions_baseline.json "${args[@]}"
