"""`impl.sglang.capabilities` on source checkouts of SGLang ``main`` between releases: read off the code.

Why: the PR as merged (22e003580) has a different *shape* from every release:
the gate is called inside ``process_mm_data_async`` (no per-image artifact
path, no ``_process_mm_data_uncached``), the deferred config is a plain dict
without ``backend``, the owner's loader refuses a selection mixing deferred
and eager items, there is no EPD deferred producer, and IPC goes through the
PR-era shared-memory counter pool. The driver must find each of these in the
loaded code (`impl.sglang.capabilities`, `impl.sglang.counterpool`), never
from a commit id; this file checks that it does, on the real commit.

The checkouts are built here from the local mirror of SGLang's repository
(a shared, sparse clone of ``python/sglang``: about a second each); the
mirror is any git repository of SGLang named by ``DEFERLAB_SGLANG_GIT``;
without it (CI has none) every test skips, saying so. One SGLang per process:
each commit runs in a child that prints its probes as JSON. 3d3194f6c (the
0.5.18 state) is the control: the same probes must find both call sites, the
dataclass contract, and a consumer that accepts the mixed selection.
"""

from __future__ import annotations

import os
import subprocess
import textwrap
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from deferlab.reference.oracle.navit import resize_config
from deferlab.reference.system.contract import DEFERRED_PREPROCESSING_KEY as DEFERRED_KEY
from deferlab.reference.system.profiles import profile
from tests.impl.sglang.support import run_child

# A git repository of SGLang holding the commits below (any clone: ``git clone
# https://github.com/sgl-project/sglang``); named by the environment, never by a path of ours.
MIRROR_ENV = "DEFERLAB_SGLANG_GIT"
MIRROR = Path(os.environ[MIRROR_ENV]) if os.environ.get(MIRROR_ENV) else None
PR = "22e003580bc0032918f1ebd1111de4850e33ec0f"  # PR #33921 as merged
CONTROL = "3d3194f6c311c16ccfe37fa494a652ab06d1a96e"  # per-image artifacts, dataclass contract (0.5.18's state)
MIX_ERROR = "Kimi-K3 cannot mix deferred and preprocessed image features"

CHILD = textwrap.dedent(
    """
    import json, sys
    import torch
    from deferlab.impl.sglang import provenance
    from deferlab.impl.sglang.driver import SGLangImpl
    from deferlab.properties.claimcheck import raised_inside
    from deferlab.reference.system.contract import DEFERRED_PREPROCESSING_KEY as KEY
    from deferlab.reference.system.profiles import profile

    def raised(fn):
        try:
            fn()
        except Exception as e:
            return {"error": f"{type(e).__name__}: {e}", "in_sglang": raised_inside(e, root)}
        return None

    sgl = SGLangImpl(sys.argv[1])
    root = str(sgl.source.root)
    seam = sgl
    caps = sgl.capabilities
    K3 = profile("kimi-k3")
    small = [torch.zeros((3, 32, 32), dtype=torch.uint8), torch.full((3, 28, 20), 7, dtype=torch.uint8)]
    out = {"commit": sgl.source.git_rev, "defers": seam.defers(None)}
    out["sites"] = [list(s) for s in caps.gate_sites]
    out["epd_producer"] = caps.epd_producer
    out["gate_paths"] = [list(p) for p in seam.gate_paths(None)]
    out["decisions"] = sgl.defer_decisions(small, K3)
    produced = sgl.process(small, K3)
    out["calls"] = [[c.site, c.n_images, c.result] for c in produced.calls]
    config = produced.items[0].model_specific_data[KEY]
    out["contract"] = {"type": type(config).__name__, "fields": sorted(
        config if isinstance(config, dict) else config.__dataclass_fields__)}
    out["artifact_refused"] = raised(lambda: sgl.defer_decisions(small, K3, gate_path="artifact"))
    eager = sgl.process(small, K3, transport="cuda_ipc").items
    deferred = sgl.epd_items(small, K3)
    out["eager_keys"] = sorted(eager[1].model_specific_data)
    out["mixed"] = raised(lambda: sgl.materialize([deferred[0], eager[1]], [0, 1], K3))
    out["owner_rows"] = raised(lambda: out.__setitem__("rows", sgl.materialize(produced.items, [1, 0], K3).shape[0]))
    counts = sgl.ipc_counts()
    out["pool"] = counts.pool_kind
    out["requested_tp4_dp2"] = counts.consumer_requested(4, 2, 2, True)
    out["non_owner_release"] = sgl.ack_source("cuda_ipc").non_owner_release
    out["prov_epd"] = provenance.of(sgl)["epd_items"]
    print("JSON:" + json.dumps(out))
    """
)


def _checkout(root: Path, commit: str) -> Path:
    """A sparse (``python/sglang``), shared clone of the mirror at ``commit``; skips when that cannot be built."""
    if MIRROR is None or not MIRROR.is_dir():
        pytest.skip(f"set {MIRROR_ENV} to a git repository of SGLang to build the commit checkouts (CI has none)")
    if subprocess.run(["git", "-C", str(MIRROR), "rev-parse", "--git-dir"], capture_output=True).returncode:
        pytest.skip(f"{MIRROR_ENV} names {MIRROR}, which is not a git repository")
    if subprocess.run(
        ["git", "-C", str(MIRROR), "cat-file", "-e", f"{commit}^{{commit}}"], capture_output=True
    ).returncode:
        pytest.skip(f"the SGLang mirror at {MIRROR} does not hold commit {commit}")
    target = root / commit[:9]
    if not (target / "python" / "sglang").is_dir():
        for cmd in (
            ["git", "clone", "-q", "--shared", "--no-checkout", str(MIRROR), str(target)],
            ["git", "-C", str(target), "sparse-checkout", "set", "python/sglang"],
            ["git", "-C", str(target), "checkout", "-q", commit],
        ):
            subprocess.run(cmd, check=True, capture_output=True, timeout=120)
    return target


@pytest.fixture(scope="module")
def probes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """Both commits' probes, each from its own child process (run side by side)."""
    root = tmp_path_factory.mktemp("sglang-commits")
    trees = {commit: _checkout(root, commit) for commit in (PR, CONTROL)}
    with ThreadPoolExecutor(len(trees)) as pool:
        runs = {commit: pool.submit(run_child, CHILD, str(tree)) for commit, tree in trees.items()}
        return {commit: run.result() for commit, run in runs.items()}


def test_the_pr_has_only_its_request_path_and_it_decides_per_request(probes):
    """At the PR the gate is called once per request inside process_mm_data_async; no artifact path exists."""
    pr = probes[PR]
    assert pr["commit"] == PR and pr["defers"] is True
    assert pr["sites"] == [["request", "process_mm_data_async"]]
    assert pr["gate_paths"] == [["request", False]]  # one call for the two images
    assert pr["calls"] == [["process_mm_data_async", 2, True]]
    assert pr["decisions"] == [True, True]
    refused = pr["artifact_refused"]
    assert refused is not None and not refused["in_sglang"] and "no 'artifact' call site" in refused["error"]


def test_the_pr_writes_the_dict_contract_and_refuses_a_mixed_selection(probes):
    """The PR's deferred config is a dict without ``backend``; its loader raises "cannot mix" itself."""
    pr = probes[PR]
    assert pr["contract"] == {
        "type": "dict",
        "fields": ["image_mean", "image_std", "resize_config", "transparent_bg_config"],
    }
    assert pr["mixed"] == {"error": f"ValueError: {MIX_ERROR}", "in_sglang": True}
    assert "image_grid_thw" in pr["eager_keys"] and DEFERRED_KEY not in pr["eager_keys"]  # the eager item
    k3 = profile("kimi-k3")  # the owner [1, 0] gets both images' patches (reference NaViT decision)
    assert pr["owner_rows"] is None  # the PR checks no grids, so it has no local-index bug
    assert pr["rows"] == resize_config(20, 28, k3).num_patches + resize_config(32, 32, k3).num_patches
    # no EPD deferred producer at the PR: the driver says what stands in for it
    assert pr["epd_producer"] is False and pr["prov_epd"].startswith("modelled: this version has no EPD")


def test_the_pr_counts_ipc_on_its_counter_pool(probes):
    """The PR-era pool: a shared-memory counter; the owner asks get_parallel().tp_size; nobody releases."""
    pr = probes[PR]
    assert pr["pool"] == "counter"
    assert pr["requested_tp4_dp2"] == 4  # the whole TP world, not the attention group (2)
    assert pr["non_owner_release"] is False


def test_the_control_commit_has_both_call_sites_and_the_dataclass(probes):
    """3d3194f6c: the artifact path (per image) first, the request path split out, mixed selections accepted."""
    ctl = probes[CONTROL]
    assert ctl["sites"] == [["artifact", "prepare_artifact_batch"], ["request", "_process_mm_data_uncached"]]
    assert ctl["gate_paths"] == [["artifact", True], ["request", False]]
    assert ctl["contract"]["type"] == "KimiK3DeferredPreprocessing" and "backend" in ctl["contract"]["fields"]
    assert ctl["artifact_refused"] is None and ctl["mixed"] is None
    # the owner list [1, 0] is not a prefix: 3d3194f6c's grid check indexes global grids with local positions
    assert ctl["owner_rows"] == {
        "error": "ValueError: Kimi-K3 deferred GPU preprocessing produced wrong grids",
        "in_sglang": True,
    }
    assert ctl["epd_producer"] is True and ctl["pool"] == "generation" and ctl["non_owner_release"] is False


def test_the_default_release_has_both_call_sites_artifact_first(sgl):
    """No mirror needed: the loaded release's capabilities, read off its code, as its gate calls confirm."""
    from deferlab.impl.sglang import capabilities

    caps = capabilities.of(sgl.source)
    assert caps is sgl.capabilities and caps.default_path == caps.paths[0] == "artifact"
    assert dict(caps.gate_sites) == {"artifact": "prepare_artifact_batch", "request": "_process_mm_data_uncached"}
    assert caps.method("request") == "_process_mm_data_uncached" and caps.epd_producer is True
