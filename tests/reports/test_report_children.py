"""The report's Kimi-K3 steps run each engine in a child: its process loads no engine, and the steps say the same.

Why: issue 29 item 4, "``reports/`` never loads an engine in its own process". The served paths, C13's exhaustive
sweep over them and the skew table used to load SGLang's and vLLM's releases into the CLI's process (and the front
door vLLM's); now each engine's paths live in a child of their own (`reports.report.served.kimi`), asked by the
steps. The slow test drives those steps as `reports.report.run` does, in a fresh process, and compares what they
give with the same steps recorded before the move (``report_children_head.json``: deferlab 2056642, the engines
loaded in the process); the others check the pieces without an engine.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from deferlab.reference.system.profiles import profile
from deferlab.reports.report.served.kimi import RemotePath, config_of, config_request
from deferlab.reports.report.served.paths import RunPaths, model_paths
from deferlab.reports.report.sweeps import geometry as geo

HEAD = Path(__file__).with_name("report_children_head.json")
ENGINES = {"sglang": "0.5.23", "vllm": "0.34.0"}  # the releases the recording loaded (both cached by the suite)

# The steps as `reports.report.run.collect` calls them (paths, sweeps:geometry, served), then what the process
# holds: an engine's tree is imported under its package's name (`impl.loader.sources.active`).
_STEPS = """import hashlib, json, sys
import numpy as np
from deferlab.reference.system.profiles import profile
from deferlab.reference.system.engines import ENGINES
from deferlab.reports.report.served import report
from deferlab.reports.report.served.paths import RunPaths

said = []
cfg, paths = profile("kimi-k3"), RunPaths(engines=json.loads(sys.argv[1]))
paths.get()
records = report.geometry_step(cfg, paths, 40, said.append)
doc, columns = report.served_step(cfg, paths, said.append, ("kimi-k3",))
arrays = ("trained_values", "served_values", "trained_table", "served_table", "diff_levels")
def digest(a):
    return hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()[:16] + str(a.dtype) + str(a.shape)
worst = [[c.name, cls, w.origin, w.max_levels, w.crop, w.full, [digest(getattr(w, a)) for a in arrays]]
         for c in columns for cls, cell in c.cells.items() if (w := cell.worst) is not None]
trees, drivers = {f.package or f.name for f in ENGINES.values()}, tuple(f"deferlab.impl.{n}." for n in ENGINES)
loaded = sorted(m for m in sys.modules if m.split(".")[0] in trees or m.startswith(drivers))
systems = {e: {k: v for k, v in d.items() if k not in ("root", "load_seconds")} for e, d in paths.systems().items()}
geometry = [{k: v for k, v in r.items() if k != "geometry_seconds"} for r in records]
print(json.dumps({"said": said, "geometry": geometry, "served": doc, "worst": worst, "systems": systems,
                  "errors": paths.errors, "loaded": loaded}, default=str))
"""


def _engine_modules(found: list[str]) -> list[str]:
    """The modules of an engine's tree or driver; its plugin's modules the registry imports (hooks, plugin) are
    not the engine."""
    return [m for m in found if not m.endswith((".hooks", ".plugin"))]


@pytest.mark.slow
@pytest.mark.extra("vllm")
def test_kimi_steps_load_no_engine_here_and_give_what_they_gave() -> None:
    """SGLang's and vLLM's Kimi-K3 paths through the paths, sweep (40 x 40) and served steps: the process that ran
    them imported neither engine, and every record, column, worst image, progress line and system description
    equals the recording made with the engines loaded in the process."""
    done = subprocess.run(
        [sys.executable, "-c", _STEPS, json.dumps(ENGINES)], capture_output=True, text=True, timeout=1500
    )
    if done.returncode != 0 and "cannot be fetched" in done.stderr:
        pytest.skip(f"an engine release is not cached: {done.stderr.strip().splitlines()[-1]}")
    assert done.returncode == 0, done.stderr[-2000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["errors"] == {}
    assert _engine_modules(got["loaded"]) == [], "an engine was loaded in the report's process"
    want = json.loads(HEAD.read_text())
    for key in ("said", "geometry", "served", "worst", "systems"):
        assert got[key] == want[key], key


def test_the_module_check_can_fail() -> None:
    """What the slow test looks for: a loaded tree's modules and an engine's driver count, its plugin does not."""
    found = ["sglang", "sglang.srt.utils", "deferlab.impl.vllm.driver", "deferlab.impl.vllm.hooks"]
    assert _engine_modules(found) == ["sglang", "sglang.srt.utils", "deferlab.impl.vllm.driver"]


def test_a_geometry_swept_in_parts_gives_the_records_of_one_sweep() -> None:
    """The model's deferred path swept as an engine child sweeps its paths (`geometry.part`, through the JSON of
    its answer) and merged after the eager one: the same records as both swept here, in the same order."""
    cfg = profile("kimi-k3")
    eager, deferred = model_paths()

    def remote(_name: str, c: Any) -> Any:
        return lambda: [json.loads(json.dumps(geo.part([deferred], config_of(config_request(c)), 30)))]

    said: list[str] = []
    merged = geo.geometry_records([eager], cfg, max_side=30, progress=said.append, remote=remote)
    whole = geo.geometry_records([eager, deferred], cfg, max_side=30)
    strip = lambda rs: [{k: v for k, v in r.items() if k != "geometry_seconds"} for r in rs]  # noqa: E731
    assert strip(merged) == strip(whole) and len(whole) == 4
    assert said[0] == "sweep: C13 geometry kimi-k3, every size up to 30 x 30: navit_resize_config, navit_resize_config"


def test_a_config_travels_whole() -> None:
    """A request's config is the step's, name included (the sweep names a run config by it)."""
    cfg = profile("kimi-k2.5").with_(in_patch_limit=4096, name="mine")
    back = config_of(json.loads(json.dumps(config_request(cfg))))
    assert back == cfg and back.name == "mine"


def test_an_engine_that_cannot_load_is_one_line_and_no_child_is_left(tmp_path: Path) -> None:
    """The child's load fails: the engine's one line (as the in-process load said it), the model's paths kept,
    nothing of the engine's in this process, and no child left running."""
    from deferlab.reports.core import process

    before = set(process.live())
    paths = RunPaths(sglang=str(tmp_path / "nowhere"))
    found = paths.get()
    assert [type(p) for p in found] == [type(model_paths()[0])] * 2
    assert not any(isinstance(p, RemotePath) for p in found)
    line = paths.errors["sglang"]
    assert line.startswith(f"sglang {str(tmp_path / 'nowhere')!r}: ") and "no such path" in line and "\n" not in line
    assert set(process.live()) <= before


_FRONT = """import json, sys
from deferlab.reports.report.front import load_kimi_or_refuse
load_kimi_or_refuse("vllm", sys.argv[1])
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] == "vllm" or m.startswith("deferlab.impl.vllm."))))
"""


@pytest.mark.extra("vllm")
def test_the_front_door_loads_vllm_in_a_short_child(tmp_path: Path) -> None:
    """``report --vllm 0.34.0``'s load check passes without vLLM in the CLI's process; a folder that is not a vLLM
    checkout is refused in the driver's one line, as when the check loaded it here."""
    from deferlab.reference.system.errors import UsageError
    from deferlab.reports.report.front import load_kimi_or_refuse

    done = subprocess.run([sys.executable, "-c", _FRONT, ENGINES["vllm"]], capture_output=True, text=True)
    if done.returncode != 0 and "cannot be fetched" in done.stderr:
        pytest.skip(f"vLLM {ENGINES['vllm']} is not cached: {done.stderr.strip().splitlines()[-1]}")
    assert done.returncode == 0, done.stderr[-2000:]
    assert _engine_modules(json.loads(done.stdout.strip().splitlines()[-1])) == []
    with pytest.raises(UsageError) as refused:
        load_kimi_or_refuse("vllm", str(tmp_path))
    line = str(refused.value)
    assert line.startswith(f"--vllm: vllm source {str(tmp_path)!r}: ") and "is not a vLLM checkout" in line
    assert "\n" not in line
