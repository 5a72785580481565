"""The report's served-vs-trained parts on fake served paths: the skew table, its figures and markdown, the served
step inside a report, and ``--checkpoint``.

Fake paths serve through the checkpoint oracle itself (so the expected cells
are known exactly: bitwise, one level off, refused), which keeps every test
here a few seconds; real engines run in ``test_served_vllm_end_to_end``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from deferlab.reference.oracle import checkpoint
from deferlab.reference.oracle import skew as oracle_skew
from deferlab.reference.system.profiles import profile, profile_media_proc_cfg
from deferlab.reports.report.plots import served as plots_served
from deferlab.reports.report.served import images, skew
from deferlab.reports.report.served.checkpoint import read_checkpoint
from deferlab.reports.report.served.paths import RunPaths
from deferlab.reports.report.served.render import served_section
from deferlab.reports.report.served.report import served_step
from tests.reports.support import write_results

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
CFG = profile("kimi-k3")
CLASSES = ("RGB", "RGBA partly transparent", "P", images.ARRAY_CLASS)


def _is_probe(image: Any) -> bool:
    return not isinstance(image, np.ndarray) and np.array_equal(np.asarray(image), oracle_skew.level_probe())


class FakePath:
    """A served path over the checkpoint oracle: ``shift`` levels added where the oracle's level is even
    (clipped; not to the level probe, so its own normalization stays the checkpoint's), and a refusal for the
    listed PIL modes (``"array"``: uint8 arrays)."""

    dtype, real_code, path = "float32", False, "served"

    def __init__(self, name: str, shift: int = 0, refuse: tuple[str, ...] = (), broken: bool = False) -> None:
        self.name = self.label = self.system = name
        self.shift, self.refuse, self.broken = shift, refuse, broken

    def serve(self, imgs: list[Any], cfg: Any) -> tuple[np.ndarray, np.ndarray]:
        if self.broken:
            raise RuntimeError("this path is broken\nsecond line")
        for im in imgs:
            kind = "array" if isinstance(im, np.ndarray) else im.mode
            if kind in self.refuse:
                raise ValueError(f"Unsupported data type {kind}")
        pv, grids = checkpoint.preprocess(imgs, cfg)
        if not self.shift or _is_probe(imgs[0]):
            return pv, grids
        table = checkpoint.normalization_table(cfg)  # (3, 256) float32
        levels = oracle_skew.recover_levels(pv.transpose(1, 0, 2, 3), table)  # (3, N, p, p)
        moved = np.where(levels % 2 == 0, np.clip(levels.astype(int) + self.shift, 0, 255), levels)
        out = np.stack([table[c][moved[c]] for c in range(3)], axis=1).astype(np.float32)
        return out, grids

    def geometry_function(self, cfg: Any) -> Any:
        return lambda w, h: checkpoint.resize_config(w, h, cfg)


def _samples() -> dict[str, list[images.Sample]]:
    return {c: images.generated(c, 2) for c in CLASSES}


def test_generated_images_are_seeded_and_of_their_class() -> None:
    """The same pixels every run, sides in 8..40 (then the RESIZED sizes), and each PIL image classified as the row
    it was drawn for."""
    for cls in images.CLASSES:
        a, b = images.generated(cls, 2), images.generated(cls, 2)
        assert [x.size for x in a[2:]] == list(images.RESIZED)
        for x, y in zip(a, b, strict=True):
            small = all(images.MIN_SIDE <= s <= images.MAX_SIDE for s in x.size)
            assert x.origin == y.origin and (small or x.size in images.RESIZED), x.size
            if cls == images.ARRAY_CLASS:
                assert isinstance(x.image, np.ndarray) and np.array_equal(x.image, y.image)
            else:
                assert x.image.tobytes() == y.image.tobytes() and images.classify(x.image) == cls, cls


def test_corpus_images_fall_in_their_rows() -> None:
    """Every shipped corpus image the table takes is of the class it is listed under."""
    found = images.corpus_samples()
    assert {"RGB", "P", "RGBA partly transparent", "LA"} <= set(found)
    for cls, samples in found.items():
        assert all(images.classify(s.image) == cls for s in samples)


def test_skew_cells_bitwise_off_by_levels_refused_and_no_table() -> None:
    """An exact path is bitwise everywhere; a shifted one shows its shift in levels; a refusing one gets
    ``refused: <one line>`` for that class only; a broken one gets a column without a table, never a crash."""
    paths = [
        FakePath("exact"),
        FakePath("shift3", shift=3),
        FakePath("no-P", refuse=("P", "array")),
        FakePath("broken", broken=True),
    ]
    cols = skew.skew_table(paths, CFG, _samples())
    exact, shifted, refusing, broken = (c.to_dict() for c in cols)
    for cls in CLASSES:
        cell = exact["cells"][cls]
        assert cell["status"] == "ok" and cell["bitwise_share"] == 1.0 and cell["max_levels"] == 0, cls
        assert cell["grid_agreement"] == 1.0 and cell["max_ulps"] == 0
        assert shifted["cells"][cls]["max_levels"] == 3 and shifted["cells"][cls]["bitwise_share"] < 1.0
    assert refusing["cells"]["P"]["status"] == "refused"
    assert refusing["cells"]["P"]["refusal"] == "ValueError: Unsupported data type P"
    assert refusing["cells"][images.ARRAY_CLASS]["status"] == "refused"
    assert refusing["cells"]["RGB"]["status"] == "ok"
    assert broken["table_error"] == "RuntimeError: this path is broken" and broken["cells"] == {}
    worst = cols[1].cells["RGB"].worst
    assert worst is not None and worst.max_levels == 3 and worst.diff.max() == 3
    assert worst.trained.shape == worst.served.shape and worst.trained.dtype == np.uint8


def test_skew_figures_and_markdown(tmp_path: Path) -> None:
    """The heatmap always; a worst-case PNG only for a path over one level; the markdown says refused in one line."""
    cols = skew.skew_table(
        [FakePath("exact"), FakePath("shift3", shift=3), FakePath("no-P", refuse=("P",))], CFG, _samples()
    )
    figs = plots_served.served_figures({**skew.table_dict(cols, _samples()), "config": "kimi-k3"}, cols, tmp_path)
    assert [f["name"] for f in figs] == ["served_skew", "served_worst_shift3"]
    for f in figs:
        data = (tmp_path / f["file"]).read_bytes()
        assert data.startswith(PNG_MAGIC) and len(data) > 5000
    md = "\n".join(served_section({**skew.table_dict(cols, _samples()), "config": "kimi-k3"}))
    assert "| RGB | 4 | 0 lv, 100.0% bitwise, 0 ulps | 3 lv," in md
    assert "refused: ValueError: Unsupported data type P" in md


def test_served_step_in_a_report_and_an_engine_that_cannot_load(tmp_path: Path) -> None:
    """The served step writes report.json's ``served`` and report.md's table; an engine that failed to load
    fails the step (exit 3) with its one line, the other paths' columns kept."""
    from deferlab.reports.report.run import ReportOptions, run_report

    def opts(out: str, paths: RunPaths) -> ReportOptions:
        return ReportOptions(
            profile="ci",
            config=CFG,
            config_source="test",
            out=tmp_path / out,
            baseline=None,
            from_results=write_results(tmp_path / "res"),
            skip={"ipc", "sweeps", "sim", "bench", "plots"},
            paths=paths,
        )

    assert run_report(opts("ok", RunPaths(_paths=[FakePath("exact")]))) == 0
    report = json.loads((tmp_path / "ok" / "report.json").read_text())
    assert [c["name"] for c in report["served"]["columns"]] == ["exact"]
    assert "### Served vs trained (skew table)" in (tmp_path / "ok" / "report.md").read_text()
    failing = RunPaths(_paths=[FakePath("exact")], errors={"vllm": "vllm '9.9.9': VLLMSourceError: no such"})
    assert run_report(opts("bad", failing)) == 3
    report = json.loads((tmp_path / "bad" / "report.json").read_text())
    step = {s["name"]: s for s in report["steps"]}["served"]
    assert step["status"] == "failed" and step["error"] == "vllm '9.9.9': VLLMSourceError: no such"
    assert [c["name"] for c in report["served"]["columns"]] == ["exact"]


def test_served_step_reads_its_table_under_a_config_that_would_resize_the_probe() -> None:
    """A tiny geometry (patch 1, 4 patches) resizes 16 x 16: the table is read under raised limits instead."""
    tiny = CFG.with_(patch_size=1, merge_kernel_size=1, in_patch_limit=4, patch_limit_on_one_side=100)
    doc, cols = served_step(tiny, RunPaths(_paths=[FakePath("exact")]), lambda _m: None)
    assert cols[0].table_error is None and doc["columns"][0]["cells"]["RGB"]["bitwise_share"] == 1.0


def test_checkpoint_folder_gives_config_and_raw_media_proc_cfg(tmp_path: Path) -> None:
    """A snapshot folder's preprocessor_config.json: the validated config (fill stage read) and the raw dict
    as written, unknown processor keys beside media_proc_cfg left out of it."""
    media = {**profile_media_proc_cfg("kimi-k3"), "in_patch_limit_each_frame": 4096}
    (tmp_path / "preprocessor_config.json").write_text(json.dumps({"media_proc_cfg": media, "auto_map": {}}))
    cfg, raw = read_checkpoint(tmp_path)
    assert cfg.fill_stage == "after_resize" and cfg.in_patch_limit == 65536 and raw == media


def test_an_engine_that_cannot_load_is_recorded_not_raised(tmp_path: Path) -> None:
    """RunPaths keeps the model's paths and records the engine's one line (the steps then fail with it)."""
    paths = RunPaths(sglang=str(tmp_path / "nowhere"))
    found = paths.get()
    assert [p.path for p in found] == ["eager", "deferred"] and set(paths.errors) == {"sglang"}
    assert "\n" not in paths.errors["sglang"] and "no such path" in paths.errors["sglang"]


@pytest.mark.slow
@pytest.mark.extra("vllm")
def test_served_vllm_end_to_end(tmp_path: Path) -> None:
    """``report --vllm 0.34.0`` (the release the vLLM tests load in-process: one vLLM a process) on the cached wheel: the skew table has the column of vLLM's default path (device-normalized from 0.32.0, semantics §16.1) with its known findings
    (uint8 arrays refused by vLLM itself, transparency composited onto white, opaque classes bitwise), C13's
    exhaustive records hold for it, and its numba-compiled geometry equals its interpreted one."""
    from deferlab.impl.vllm.sources import VLLMFetchError, load
    from deferlab.reports.cli import main
    from deferlab.reports.report.served.paths import vllm_path
    from deferlab.reports.report.sweeps import geometry as geo

    try:
        load("0.34.0")
    except VLLMFetchError as e:
        pytest.skip(f"vLLM 0.34.0 is not cached and cannot be fetched: {e}")
    argv = ["report", "--vllm", "0.34.0", "--from-results", str(write_results(tmp_path / "res"))]
    argv += ["--out", str(tmp_path / "r"), "--baseline", "none", "--sweep-max-side", "64", "--sweep-limits", "4096"]
    assert main([*argv, "--skip", "ipc", "sim", "bench", "plots"]) == 0
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    cols = {c["name"]: c["cells"] for c in report["served"]["columns"]}
    vllm = cols["vllm-0.34.0 (device-normalized)"]
    assert (
        vllm[images.ARRAY_CLASS]["status"] == "refused"
        and "Unsupported data type" in vllm[images.ARRAY_CLASS]["refusal"]
    )
    assert vllm["RGBA partly transparent"]["max_levels"] > 1 and vllm["RGB with a stray key"]["max_levels"] > 1
    # Opaque classes: the same levels everywhere, but not the same values: the device path's x * w + b is not
    # the checkpoint's normalization (semantics §16.1, C15 on the default path).
    for cls in ("L", "RGBA opaque"):
        assert vllm[cls]["max_levels"] == 0 and vllm[cls]["bitwise_share"] < 1.0, (cls, vllm[cls])
    geometry = [
        s for s in report["sweeps"] if s["kind"] == "geometry" and s["path"] == "vllm-0.34.0 (device-normalized)"
    ]
    assert [g["verdict"] for g in geometry] == ["holds", "holds"] and geometry[0]["sizes"] == 64 * 64
    assert "vllm-0.34.0 (device-normalized)" in (tmp_path / "r" / "report.md").read_text()
    target = geo.engine_function(vllm_path("0.34.0"))
    assert target.name.endswith("kimi_k25_vision_fused.navit_resize_image")
    args = target.args(CFG, compiled=True)
    compiled = geo.compile_engine(target, args)
    assert geo.check(compiled, args, target.bound(CFG), *geo.check_sizes(CFG)) == []
