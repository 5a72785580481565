#!/usr/bin/env bash
# How tight is the claims' net on real SGLang? cosmic-ray's mutants of 0.5.23's own code, gated on a baseline.
#
#   bash scripts/mutate.sh            # CI: a small fixed sample (10 mutants of the normalization, compositing
#                                     # and geometry functions, measured by the three claims that are quick
#                                     # there: C12, C13, C15), gated on reports/mutate_baseline.json; report in
#                                     # reports/out/mutate-ci; about 2 minutes on 2 cores (warm forks, semantics §17.1)
#   bash scripts/mutate.sh --full     # the default campaign, a local step: 100 mutants (seed 0) of every engine
#                                     # function the claims' recorded provenance names, the claims that entered
#                                     # each, stopped at the first that sees it (--first-kill); report in
#                                     # reports/out/mutate-full (interrupted? run it again: it resumes; delete
#                                     # the folder for a fresh one); see the README for its time on 2 cores.
#                                     # Add --compare-selection K to also run K mutants with every claim and
#                                     # measure what provenance selection saves (each such run costs about as
#                                     # much as a survivor run with every unit)
#
# A campaign bigger than one box runs as --target slices, one per machine, each with its own --out.
# Exit 0: no mutant the baseline saw killed survives now; 1: one does (a claim went blind: mutate.md names it and
# shows its diff; if the change is intended, rerun with --update-baseline); 2: bad usage.
# Needs the deferlab[mutate] extra (cosmic-ray).
set -uo pipefail
cd "$(dirname "$0")/.."
if [[ "${1:-}" == "--full" ]]; then
    shift
    out=reports/out/mutate-full
    resume=()
    [[ -f "$out/campaign.sqlite" ]] && resume=(--resume)
    exec python -m deferlab.reports.cli mutate --sglang 0.5.23 --sample 100 --seed 0 --jobs 2 \
        --first-kill --out "$out" "${resume[@]}" "$@"
fi
out=reports/out/mutate-ci
rm -rf "$out"  # the last CI sample's report (a fresh campaign each time; the reference run is cached)
K3=sglang/srt/multimodal/kimi_k3_image_processing.py
exec python -m deferlab.reports.cli mutate --sglang 0.5.23 --sample 10 --seed 17 --jobs 2 --first-kill \
    --claims C12,C13,C15 \
    --target "$K3:normalization_tensors" --target "$K3:fill_transparent_bg" \
    --target sglang/srt/multimodal/processors/kimi_k25.py:navit_resize_config \
    --target sglang/kernels/ops/mm/process/image.py:_normalize_and_patchify_torch \
    --baseline reports/mutate_baseline.json --out "$out" "$@"
