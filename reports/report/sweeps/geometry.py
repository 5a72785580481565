"""C13 exhaustive: every width x height in 1..max_side, each served path's geometry against the oracle's.

Why beside the gate sweeps: C13's claim test draws sizes; this step leaves
none out for the shipped checkpoint geometries (kimi-k3, kimi-k2.5, and the
run's own config when it differs). Reference: the vectorized oracle
``reference.oracle.navit.resize_config_arrays``, itself checked against the
checkpoint oracle's scalar ``resize_config`` first. Each path's engine
function (vLLM's ``navit_resize_image``, SGLang's ``navit_resize_config``,
the model's ``impl.navit.navit_resize_config``) is compiled with numba
(`impl.compiled`, its dict or dataclass return rewritten to a
tuple) and trusted only once it equals the interpreted function on
`check_sizes` (>= 20,000 sizes); a path whose function cannot be found or
compiled, or disagrees, is swept interpreted over `reduced_sizes` instead,
and its record says so. Grids small enough to run interpreted in about a
second are run interpreted in full (nothing to compile).
"""

from __future__ import annotations

import collections
import hashlib
import importlib
import inspect
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

from deferlab.impl import compiled as comp
from deferlab.reference.oracle.navit import resize_config_arrays
from deferlab.reference.system.config import PreprocessConfig
from deferlab.reference.system.engines import ENGINES
from deferlab.reference.system.profiles import profile

GEOMETRIES = ("kimi-k3", "kimi-k2.5")
KEYS = ("new_width", "new_height", "pad_width", "pad_height", "num_tokens")
CHECK_MAX_SIDE = 16384  # the equivalence check's random sizes go this far
INTERPRETED_FULL = 300_000  # up to this many sizes, the full grid runs interpreted (about a second)
REDUCED_RANDOM = 20_000
_COMPILED: dict[str, comp.Compiled | str] = {}  # function source SHA-256 -> compiled (or why not), per process
# The model's function takes the config object; compiled, it gets this tuple of the attributes it reads.
Geometry = collections.namedtuple(
    "Geometry", "patch_size merge_kernel_size in_patch_limit patch_limit_on_one_side fixed_output_tokens"
)


@dataclass
class EngineFunction:
    """The function a path computes its geometry with, and how it is called: ``fn(w, h, *args_of(cfg))``."""

    name: str
    fn: Callable[..., Any]
    takes_config: bool  # True: fn(w, h, config) (the model's); False: fn(w, h, p, m, limit, one_side, fixed)

    def args(self, cfg: PreprocessConfig, *, compiled: bool) -> tuple[Any, ...]:
        g = (cfg.patch_size, cfg.merge_kernel_size, cfg.in_patch_limit, cfg.patch_limit_on_one_side)
        if self.takes_config:
            return (Geometry(*g, cfg.fixed_output_tokens),) if compiled else (cfg,)
        return (*g, cfg.fixed_output_tokens)

    def bound(self, cfg: PreprocessConfig) -> Callable[[int, int], Any]:
        args = self.args(cfg, compiled=False)
        return lambda w, h: self.fn(w, h, *args)

    @property
    def call(self) -> comp.Call:
        return comp.Call(f"f(w, h, {'a0' if self.takes_config else 'a0, a1, a2, a3, a4'})", KEYS)


def source_sha256(fn: Callable[..., Any]) -> str:
    """SHA-256 of the function's source text (what a compiled result is valid for)."""
    try:
        text = inspect.getsource(fn)
    except (OSError, TypeError):
        text = repr(getattr(fn, "__code__", fn))
    return hashlib.sha256(text.encode()).hexdigest()


def compile_engine(target: EngineFunction, args: tuple[Any, ...]) -> comp.Compiled:
    """The engine function compiled for ``args`` (its returns made tuples; a raise propagates, as interpreted);
    `comp.CompileError` when it cannot be."""
    name = target.fn.__qualname__
    return comp.compile_call(target.fn, target.call, args, name, tuple_returns=True, refusals=False)


def values(fn: Callable[[int, int], Any]) -> Callable[[int, int], list[int]]:
    """``fn``'s `KEYS` per size (it returns a dict or an object with those attributes)."""
    pick = lambda r: [r[k] for k in KEYS] if isinstance(r, dict) else [getattr(r, k) for k in KEYS]  # noqa: E731
    return lambda w, h: pick(fn(w, h))


def check_sizes(cfg: PreprocessConfig) -> tuple[np.ndarray, np.ndarray]:
    """The equivalence check's sizes: every size up to 64 x 64, each boundary side (up to 4096) against 4 seeded
    others in both orders, and 10,000 seeded sizes up to `CHECK_MAX_SIDE`."""
    steps = (cfg.patch_size, cfg.factor)
    return comp.check_sizes(steps, 4096, small=64, random_side=CHECK_MAX_SIDE, ends=False)


def check(
    compiled: comp.Compiled, args: tuple[Any, ...], reference: Callable[[int, int], Any], ws: np.ndarray, hs: np.ndarray
) -> list[str]:
    """Sizes (up to 5, ``WxH: compiled ... != interpreted ...``) where the compiled function disagrees."""
    want = comp.evaluate(values(reference), ws, hs)
    return comp.disagreements(compiled.pairs(ws, hs, args), want, ws, hs, "compiled", "interpreted ")


def _geometry_hooks() -> list[Any]:
    """The engines' hooks modules that answer ``kimi_geometry_function`` (`EngineFacts.hooks`), in registry order."""
    found = (importlib.import_module(facts.hooks) for facts in ENGINES.values() if facts.hooks)
    return [hooks for hooks in found if hasattr(hooks, "kimi_geometry_function")]


def _named(fn: Callable[..., Any], takes_config: bool) -> EngineFunction:
    return EngineFunction(f"{fn.__module__}.{fn.__qualname__}", fn, takes_config)


def engine_function(path: Any) -> EngineFunction | str:
    """The path's own geometry function, or why it has none to check (a string). An engine's path is answered by
    its plugin's hooks (``kimi_geometry_function``: None for a path not its own), so this module names no engine's
    package (issue 29, item 4)."""
    for hooks in _geometry_hooks():
        found = hooks.kimi_geometry_function(path)
        if found is not None:
            return found if isinstance(found, str) else _named(found, False)
    fn = getattr(path, "_resize_config", None)  # deferlab's model (impl.served.SeamPath)
    if inspect.isfunction(fn) and len(inspect.signature(fn).parameters) == 3:
        return _named(fn, True)
    return "no engine function found: the path's geometry_function is swept interpreted"


def reduced_sizes(cfg: PreprocessConfig, max_side: int, *, seed: int = 7) -> tuple[np.ndarray, np.ndarray]:
    """The interpreted fallback's sizes: every size up to 64 x 64, each boundary side (multiples of patch and
    factor, +-1) against every boundary side up to 256 and 8 seeded others, and `REDUCED_RANDOM` seeded sizes."""
    rng = np.random.default_rng(seed)
    edge = comp.boundary_sides((cfg.patch_size, cfg.factor), max_side, ends=False)
    near = edge[edge <= 256]
    small = np.arange(1, min(64, max_side) + 1)
    pairs = [np.stack(np.meshgrid(small, small), -1).reshape(-1, 2)]
    others = np.concatenate([near, rng.integers(1, max_side + 1, 8)])
    pairs.append(np.stack(np.meshgrid(edge, others), -1).reshape(-1, 2))
    pairs.append(np.stack(np.meshgrid(others, edge), -1).reshape(-1, 2))
    pairs.append(rng.integers(1, max_side + 1, (REDUCED_RANDOM, 2)))
    both = np.unique(np.concatenate(pairs).astype(np.int64), axis=0)
    return both[:, 0], both[:, 1]


def _oracle(ws: np.ndarray, hs: np.ndarray, cfg: PreprocessConfig) -> np.ndarray:
    r = resize_config_arrays(ws, hs, cfg)
    return np.stack([np.broadcast_to(getattr(r, k), np.broadcast(ws, hs).shape) for k in KEYS])


def check_oracle(cfg: PreprocessConfig, checkpoint: Any = None) -> list[str]:
    """Sizes where the vectorized oracle differs from the checkpoint oracle's scalar ``resize_config``."""
    if checkpoint is None:
        from deferlab.reference.oracle import checkpoint
    ws, hs = check_sizes(cfg)
    want = comp.evaluate(values(lambda w, h: checkpoint.resize_config(w, h, cfg)), ws, hs)
    return comp.disagreements(_oracle(ws, hs, cfg), want, ws, hs, "vectorized", "checkpoint ")


@dataclass
class _Job:
    """One distinct function on one geometry (paths sharing a function share its job)."""

    target: EngineFunction | None
    reference: Callable[[int, int], Any]  # the interpreted function (the engine's, or the path's geometry_function)
    compiled: comp.Compiled | None = None
    tally: comp.Tally | None = None
    result: dict[str, Any] | None = None


def _prepare(job: _Job, cfg: PreprocessConfig, cache: dict[str, comp.Compiled | str]) -> str | None:
    """Compile (once per function source) and check ``job``'s function on ``cfg``; why not, or None when trusted."""
    if job.target is None:
        return "no engine function found for the path"
    sha = source_sha256(job.target.fn)
    args = job.target.args(cfg, compiled=True)
    if sha not in cache:
        try:
            cache[sha] = compile_engine(job.target, args)
        except comp.CompileError as e:
            cache[sha] = str(e)
    if isinstance(cache[sha], str):
        return cache[sha]
    ws, hs = check_sizes(cfg)
    disagree = check(cache[sha], args, job.reference, ws, hs)
    job.result["check"] = {"sizes": int(ws.size), "disagreements": disagree}
    if disagree:
        return f"compiled disagrees with interpreted at {disagree[0]}"
    job.compiled = cache[sha]
    return None


def sweep_geometry(
    jobs: list[_Job], cfg: PreprocessConfig, max_side: int, cache: dict[str, comp.Compiled | str]
) -> None:
    """Every job on one geometry: the oracle's grid computed once per chunk of heights and compared with each
    job's (compiled, or interpreted when the grid is small); a job that cannot be trusted compiled runs
    interpreted on `reduced_sizes`. Fills each job's ``result`` (the first five mismatches with both answers)."""
    full = max_side * max_side
    for job in jobs:
        job.result, job.tally = {"sizes_total": full, "check": None, "note": None}, comp.Tally(keep=5)
        if full <= INTERPRETED_FULL:
            job.result.update(route="interpreted", sizes=full)
            continue
        why = _prepare(job, cfg, cache)
        if why is None:
            job.result.update(route="compiled", sizes=full)
        else:
            ws, hs = reduced_sizes(cfg, max_side)
            job.tally.add(ws, hs, comp.evaluate(values(job.reference), ws, hs), _oracle(ws, hs, cfg))
            job.result.update(route="interpreted-reduced", sizes=int(ws.size), note=f"reduced set ({why})")
    grid_jobs = [j for j in jobs if j.result["route"] in ("compiled", "interpreted")]
    engines = [
        partial(j.compiled.grid, args=j.target.args(cfg, compiled=True))
        if j.compiled is not None
        else comp.interpreted_grid(values(j.reference))
        for j in grid_jobs
    ]
    tallies = comp.sweep_grids(engines, partial(_oracle, cfg=cfg), max_side, keep=5)
    for job, tally in zip(grid_jobs, tallies, strict=True):
        job.tally = tally
    keyed = lambda v: dict(zip(KEYS, v, strict=True))  # noqa: E731
    for job in jobs:
        first = [{"width": w, "height": h, "engine": keyed(e), "oracle": keyed(o)} for w, h, e, o in job.tally.found]
        job.result.update(mismatches=job.tally.count, first_mismatches=first)


def geometries(config: PreprocessConfig) -> list[tuple[str, PreprocessConfig]]:
    """The shipped checkpoint geometries, plus the run's config when its geometry is neither."""
    named = [(name, profile(name)) for name in GEOMETRIES]
    key = lambda c: (c.patch_size, c.merge_kernel_size, c.in_patch_limit, c.patch_limit_on_one_side)  # noqa: E731
    if all(key(config) != key(c) or config.fixed_output_tokens != c.fixed_output_tokens for _, c in named):
        named.append((f"run config {config.name}", config))
    return named


def plan(paths: Sequence[Any], cfg: PreprocessConfig) -> tuple[dict[Any, _Job], list[tuple[Any, Any, str | None]]]:
    """The distinct functions (jobs) of ``paths`` on ``cfg`` and, per path, (path, its job's key, or its ``n/a``)."""
    jobs: dict[Any, _Job] = {}
    per_path = []
    for path in paths:
        target = engine_function(path)
        if isinstance(target, str) and target.startswith("n/a"):
            per_path.append((path, None, target))
            continue
        fn = target if isinstance(target, EngineFunction) else None
        key = source_sha256(fn.fn) if fn else f"path {id(path)}"
        if key not in jobs:
            jobs[key] = _Job(fn, fn.bound(cfg) if fn else path.geometry_function(cfg))
        per_path.append((path, key, None))
    return jobs, per_path


def job_names(jobs: dict[Any, _Job]) -> list[str]:
    """The jobs' functions as the sweep's progress line names them."""
    return [j.target.name.rsplit(".", 1)[-1] if j.target else "interpreted path" for j in jobs.values()]


def rows(jobs: dict[Any, _Job], per_path: list[tuple[Any, Any, str | None]]) -> list[dict[str, Any]]:
    """Per path, after `sweep_geometry`: its name and system, and its ``n/a`` line or its job's result (plain
    values: what an engine's child hands back, `reports.report.served.kimi`)."""
    out: list[dict[str, Any]] = []
    for path, key, na in per_path:
        row: dict[str, Any] = {"path": path.name, "system": path.system}
        if na is not None:
            out.append({**row, "na": na})
            continue
        job = jobs[key]
        function = job.target.name if job.target else "geometry_function (interpreted)"
        out.append({**row, "result": job.result, "function": function, "function_sha256": key if job.target else None})
    return out


def part(paths: Sequence[Any], cfg: PreprocessConfig, max_side: int) -> dict[str, Any]:
    """One geometry swept over ``paths`` in this process: the jobs' names and the paths' `rows` (the work an
    engine's child does for the report's sweep, its paths loaded there)."""
    jobs, per_path = plan(paths, cfg)
    sweep_geometry(list(jobs.values()), cfg, max_side, _COMPILED)
    return {"names": job_names(jobs), "rows": rows(jobs, per_path)}


Remote = Callable[[str, PreprocessConfig], Callable[[], list[dict[str, Any]]]]  # (geometry, config) -> the wait for
# each engine child's `part` of it, handed over before this process sweeps its own paths (they sweep meanwhile)


def geometry_records(
    paths: Sequence[Any],
    config: PreprocessConfig,
    *,
    max_side: int,
    progress: Callable[[str], None] | None = None,
    remote: Remote | None = None,
) -> list[dict[str, Any]]:
    """One record per (path, geometry): C13 exhaustive, in the sweeps' record form (``key_counters``). ``paths``
    are swept here; ``remote`` sweeps the engines' paths each in its own child, meanwhile (their records follow,
    in the engines' order, as if their paths followed these)."""
    say = progress or (lambda _m: None)
    records = []
    for gname, cfg in geometries(config):
        t0 = time.perf_counter()
        wait = remote(gname, cfg) if remote is not None else list
        oracle_bad = check_oracle(cfg)
        jobs, per_path = plan(paths, cfg)
        sweep_geometry(list(jobs.values()), cfg, max_side, _COMPILED)
        others = wait()
        names = ", ".join(job_names(jobs) + [n for p in others for n in p["names"]])
        say(f"sweep: C13 geometry {gname}, every size up to {max_side} x {max_side}: {names}")
        found = rows(jobs, per_path) + [r for p in others for r in p["rows"]]
        seconds = round(time.perf_counter() - t0, 2)
        records += [_record(row, gname, max_side, oracle_bad, seconds) for row in found]
    return records


def _record(row: dict[str, Any], gname: str, max_side: int, oracle_bad: list[str], seconds: float) -> dict[str, Any]:
    base = {"name": f"geometry/{gname}/{row['path']}", "kind": "geometry", "claim": "C13", "entry": "exhaustive"}
    base.update(geometry=gname, path=row["path"], system=row["system"], max_side=max_side)
    base.update(oracle_disagreements=oracle_bad, geometry_seconds=seconds)
    if "na" in row:
        return {**base, "verdict": "n/a", "route": "n/a", "note": row["na"], "key_counters": {}}
    result = row["result"]
    return {
        **base,
        **result,
        "function": row["function"],
        "function_sha256": row["function_sha256"],
        "verdict": "fails" if result["mismatches"] or oracle_bad else "holds",
        "key_counters": {"mismatches": result["mismatches"]},
    }
