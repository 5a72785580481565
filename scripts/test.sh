#!/usr/bin/env bash
# The test command of the README: the whole property suite under the `ci`
# Hypothesis profile, on all cores.
set -euo pipefail
cd "$(dirname "$0")/.."
python -m pytest -n auto --hypothesis-profile=ci -q "$@"
