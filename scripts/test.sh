#!/usr/bin/env bash
# The test command of the README: deferlab's own tests (tests/) and the shipped checks (properties/) under the
# derandomized `ci` Hypothesis profile, on all cores, with the strict switch on (DEFERLAB_STRICT=1: a claim that
# fails in a way claims.toml's pattern does not name fails its test, so the semantics get updated; a user's
# `deferlab report` shows it as failing with the signature marked new). The optional extras' tests skip, each
# naming its extra, when the extra is not installed. Extra arguments go to pytest (e.g. `-m extra`).
set -euo pipefail
cd "$(dirname "$0")/.."
export DEFERLAB_STRICT="${DEFERLAB_STRICT:-1}"
python -m pytest -n auto --hypothesis-profile=ci -q "$@"
