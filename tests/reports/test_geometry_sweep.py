"""C13 exhaustive (``reports.report.sweeps.geometry`` on ``.compiled``): the numba-compiled engine function against its interpreted self,
the fallbacks, and the mismatch tally, on fake engine functions written like the engines' own.
"""

from __future__ import annotations

import importlib.util
import inspect
import math

import numpy as np
import pytest

from deferlab.reference.system.profiles import profile
from deferlab.reports.report.served.paths import model_paths
from deferlab.reports.report.sweeps import geometry as geo

pytestmark = pytest.mark.extra("vllm")  # selected by CI's `-m extra` phase, skipped (naming it) without

pytest.importorskip("numba")
CFG = profile("kimi-k3")


def fake_navit(width, height, patch_size, merge_kernel_size, in_patch_limit, patch_limit_on_one_side, fixed):
    """An engine's resize config, written as vLLM's and SGLang's are (a dict of the five keys)."""
    s1 = math.sqrt(in_patch_limit / (max(1.0, width // patch_size) * max(1.0, height // patch_size)))
    scale = min(1.0, s1, patch_limit_on_one_side * patch_size / width, patch_limit_on_one_side * patch_size / height)
    new_w = min(max(1, int(width * scale)), patch_limit_on_one_side * patch_size)
    new_h = min(max(1, int(height * scale)), patch_limit_on_one_side * patch_size)
    factor = merge_kernel_size * patch_size
    pad_height = (factor - new_h % factor) % factor
    pad_width = (factor - new_w % factor) % factor
    if fixed is not None:
        num_tokens = fixed
    else:
        num_tokens = ((new_h + pad_height) // factor) * ((new_w + pad_width) // factor)
    return {
        "num_tokens": num_tokens,
        "new_width": new_w,
        "new_height": new_h,
        "pad_width": pad_width,
        "pad_height": pad_height,
    }


def uncompilable(width, height, patch_size, merge_kernel_size, in_patch_limit, patch_limit_on_one_side, fixed):
    """Reads a Python object (the module's config), which numba cannot type."""
    new_w = min(width, CFG.patch_limit_on_one_side * patch_size)
    return {"num_tokens": 1, "new_width": new_w, "new_height": height, "pad_width": 0, "pad_height": 0}


# The one bug the sweep must find: a width that is already a multiple of the factor padded by a whole factor.
PAD_BUG = ("pad_width = (factor - new_w % factor) % factor", "pad_width = factor - new_w % factor")


@pytest.fixture(scope="module")
def buggy_navit(tmp_path_factory):
    """`fake_navit` with `PAD_BUG` applied, as a mutant is: in a module of its own on disk, since the sweep
    compiles an engine function from its source file."""
    source = inspect.getsource(fake_navit)
    assert source.count(PAD_BUG[0]) == 1, "PAD_BUG no longer matches fake_navit's padding line"
    path = tmp_path_factory.mktemp("mutant") / "buggy_navit.py"
    path.write_text("import math\n\n\n" + source.replace(*PAD_BUG))
    spec = importlib.util.spec_from_file_location("buggy_navit", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.fake_navit


def _target(fn) -> geo.EngineFunction:
    return geo.EngineFunction(f"{fn.__module__}.{fn.__qualname__}", fn, False)


def test_the_equivalence_check_covers_at_least_20000_sizes() -> None:
    """Every size up to 64 x 64, each boundary side (multiples of patch and factor, +-1), random up to 16384."""
    ws, hs = geo.check_sizes(CFG)
    assert CFG.patch_size == 14 and CFG.factor == 28
    assert ws.size >= 20_000
    pairs = set(zip(ws.tolist(), hs.tolist(), strict=True))
    assert {(w, h) for w in range(1, 65) for h in range(1, 65)} <= pairs
    sides = set(ws.tolist()) | set(hs.tolist())
    assert {13, 14, 15, 27, 28, 29, 4087, 4088, 4089} <= sides and max(sides) > 4096


@pytest.mark.parametrize("fixed", [None, 64])
def test_compiled_engine_function_equals_the_interpreted_one(fixed) -> None:
    """The dict-returning function compiled from its own source equals itself interpreted on the check sizes."""
    cfg = CFG.with_(fixed_output_tokens=fixed)
    target = _target(fake_navit)
    args = target.args(cfg, compiled=True)
    compiled = geo.compile_engine(target, args)
    ws, hs = geo.check_sizes(cfg)
    assert geo.check(compiled, args, target.bound(cfg), ws, hs) == []
    assert compiled.grid(np.arange(1, 5), np.arange(1, 3), args).shape == (5, 2, 4)


def test_the_models_config_taking_function_compiles_and_agrees() -> None:
    """deferlab's model takes the config object and returns a dataclass: compiled with a tuple for both."""
    target = geo.engine_function(model_paths()[0])
    assert isinstance(target, geo.EngineFunction) and target.name == "deferlab.impl.navit.navit_resize_config"
    compiled = geo.compile_engine(target, target.args(CFG, compiled=True))
    ws, hs = geo.check_sizes(CFG)
    assert geo.check(compiled, target.args(CFG, compiled=True), target.bound(CFG), ws, hs) == []


def test_a_disagreeing_compile_is_caught_and_named(buggy_navit) -> None:
    """Checked against a reference that differs, the check names the first sizes with both answers."""
    args = _target(fake_navit).args(CFG, compiled=True)
    compiled = geo.compile_engine(_target(fake_navit), args)
    bad = geo.check(compiled, args, _target(buggy_navit).bound(CFG), *geo.check_sizes(CFG))
    assert 0 < len(bad) <= 5 and "compiled [" in bad[0] and "!= interpreted [" in bad[0]


def test_an_uncompilable_function_falls_back_to_the_reduced_interpreted_set(monkeypatch) -> None:
    """numba refusing the function is no failure: the sweep runs it interpreted on the documented reduced set."""
    monkeypatch.setattr(geo, "INTERPRETED_FULL", 0)  # force the compiled route on a small grid
    job = geo._Job(_target(uncompilable), _target(uncompilable).bound(CFG))
    geo.sweep_geometry([job], CFG, 300, {})
    assert job.result["route"] == "interpreted-reduced" and "numba cannot compile" in job.result["note"]
    ws, _ = geo.reduced_sizes(CFG, 300)
    assert job.result["sizes"] == ws.size and job.result["mismatches"] > 0  # it pads nothing: wrong off-grid


def test_mismatches_are_counted_with_the_first_five_both_ways(monkeypatch, buggy_navit) -> None:
    """A buggy engine function: compiled full-grid sweep counts every wrong size, the first five with both
    answers; the interpreted small-grid route counts the same on its grid."""
    monkeypatch.setattr(geo, "INTERPRETED_FULL", 0)
    job = geo._Job(_target(buggy_navit), _target(buggy_navit).bound(CFG))
    geo.sweep_geometry([job], CFG, 300, {})
    assert job.result["route"] == "compiled" and job.result["check"]["disagreements"] == []
    # sizes <= 300 are never resized (Kimi-K3), so every width that is a multiple of 28 is wrong, at every height
    assert job.result["mismatches"] == 10 * 300
    first = job.result["first_mismatches"][0]
    assert (first["width"], first["height"]) == (28, 1) and first["engine"]["pad_width"] == 28
    assert first["oracle"]["pad_width"] == 0 and len(job.result["first_mismatches"]) == 5
    monkeypatch.setattr(geo, "INTERPRETED_FULL", 10**6)
    small = geo._Job(_target(buggy_navit), _target(buggy_navit).bound(CFG))
    geo.sweep_geometry([small], CFG, 60, {})
    assert small.result["route"] == "interpreted" and small.result["mismatches"] == 2 * 60


def test_model_paths_hold_on_every_geometry_of_a_small_grid() -> None:
    """Both model paths share one function and one job; every record holds, named by path and geometry."""
    recs = geo.geometry_records(model_paths(), CFG, max_side=40)
    assert [r["geometry"] for r in recs] == ["kimi-k3", "kimi-k3", "kimi-k2.5", "kimi-k2.5"]
    assert all(r["verdict"] == "holds" and r["key_counters"] == {"mismatches": 0} for r in recs)
    assert recs[0]["name"] == "geometry/kimi-k3/deferlab-model/PR_33921 (eager)"
    assert recs[0]["oracle_disagreements"] == [] and recs[0]["sizes"] == 1600


def test_reduced_set_is_inside_the_grid_and_holds_the_small_sizes() -> None:
    ws, hs = geo.reduced_sizes(CFG, 4096)
    assert ws.min() >= 1 and hs.min() >= 1 and ws.max() <= 4096 and hs.max() <= 4096
    assert ws.size > 20_000 and {(w, h) for w in range(1, 65) for h in range(1, 65)} <= set(zip(ws, hs, strict=True))
