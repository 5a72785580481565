"""C13's exhaustive part for a full family (semantics §18): the engine's own geometry function over every width x
height in 1..4096, compiled (`properties.geometry_sweep`), against deferlab's vectorized oracle.

Which function, per engine and family (the one the path's ``geometry`` rests on; each engine's plugin names it,
``hooks.geometry_function``, and the family config's ``kind`` picks the oracle):

* vLLM Qwen2.5-VL: ``vllm.model_executor.models.qwen2_vl.smart_resize``; Qwen3-VL: ``qwen3_vl.image_smart_resize``
  (both transformers' ``smart_resize`` as the release imports it), called ``(height, width, factor, min_pixels,
  max_pixels)`` with the family config's values; compared: the resize target (width, height), `REFUSED` where
  it raises (a side ratio over 200) and where `reference.oracle.qwen.resize_targets` gives 0.
* SGLang Qwen: ``smart_resize`` of the module of the image processor class SGLang holds (transformers 5.19.0's).
* SGLang PaddleOCR-VL: the same for its image processor (transformers' ``paddleocr_vl`` ``smart_resize``, the
  same call), against `reference.oracle.paddleocr.resize_targets`.
* vLLM InternVL: ``vllm.transformers_utils.processors.internvl.calculate_internvl_targets`` with the ratios, tile
  size and thumbnail flag the release's processor resolves; compared: the tiled canvas (width, height) and the
  tiles with the thumbnail, against `reference.oracle.internvl.tiles_array`.
* SGLang ERNIE-4.5-VL: two steps (semantics §18.9): SGLang's own pre-resize, ``ernie45_vl.smart_resize`` with
  the module's constants, compiled, then the checkpoint processor's resize of its target (the path's
  ``staged_geometry`` second stage, vectorized), against `reference.oracle.ernie45_vl.resize_targets`.
* SGLang MiMo-V2.5: ``MiMoProcessor.smart_resize`` (its own) with the bounds ``MiMoV2Processor`` passes by default,
  against `reference.oracle.qwen.resize_targets` (the checkpoint's ``Qwen2VLImageProcessor``).
* SGLang GLM-4.1V: the ``smart_resize`` of the module of transformers' ``Glm4vImageProcessor`` (the release's pin),
  called as its ``resize`` calls it, with the processor's own T, factor and bounds (the path's ``staged_geometry``,
  no second stage), against `reference.oracle.glm4v.resize_targets`.
* SGLang MiniCPM-V 4.6: its own image processor's ``_get_sliced_grid``, ``_find_best_resize`` and
  ``_get_refine_size`` in ``preprocess``'s order (the path's ``staged_geometry``: the methods compiled with ``self`` a
  named tuple of their settings, no second stage); compared: the source size, the slice grid and one slice's size,
  against `reference.oracle.minicpm_v.targets`.
* SGLang InternVL: nothing to compile (its ``dynamic_preprocess`` tiles a torch tensor; numba compiles no
  torch): the path's own ``geometry`` runs interpreted on a reduced set, and the evidence says so.

Before the sweep the function (interpreted) is compared with the path's own ``geometry`` on the worked and some
random sizes (`spot_sizes`): a sweep of a function the path does not compute with would prove nothing.
"""

from __future__ import annotations

import importlib
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

from deferlab.impl import compiled as gc
from deferlab.properties import geometry_sweep as gs
from deferlab.reference.oracle import ernie45_vl, glm4v, internvl, minicpm_v, paddleocr, qwen
from deferlab.reference.system.engines import engine as engine_facts

MAX_SIDE = 4096
OUTPUTS = {
    "qwen": ("width", "height"),
    "internvl": ("width", "height", "tiles"),
    "paddleocr": ("width", "height"),
    "ernie": ("width", "height"),
    "mimo": ("width", "height"),
    "glm4v": ("width", "height"),
    "minicpmv": ("width", "height", "rows", "cols", "slice width", "slice height"),
}
QWEN_CALL = gc.Call("f(h, w, a0, a1, a2)", ("r[1]", "r[0]"))
INTERNVL_CALL = gc.Call(
    "f(orig_width=w, orig_height=h, target_ratios=a0, image_size=a1, use_thumbnail=a2)", ("r[1]", "r[2]", "r[0]")
)
# how each family kind's function is called
# GLM-4.1V's: smart_resize(num_frames=T, h, w, temporal_factor=T, factor, min, max) -> (h, w), as its resize calls it
GLM4V_CALL = gc.Call("f(a0, h, w, a0, a1, a2, a3)", ("r[1]", "r[0]"))
# MiniCPM-V 4.6's: the path's driver (h, w, settings) -> (source h, source w, rows, cols, slice h, slice w)
MINICPMV_CALL = gc.Call("f(h, w, a0)", ("r[1]", "r[0]", "r[2]", "r[3]", "r[5]", "r[4]"))
CALLS = {"qwen": QWEN_CALL, "internvl": INTERNVL_CALL, "paddleocr": QWEN_CALL, "ernie": QWEN_CALL, "mimo": QWEN_CALL,
         "glm4v": GLM4V_CALL, "minicpmv": MINICPMV_CALL}  # fmt: skip
ORACLE = {
    "qwen": "reference.oracle.qwen.resize_targets",
    "internvl": "reference.oracle.internvl.tiles_array",
    "paddleocr": "reference.oracle.paddleocr.resize_targets",
    "ernie": "reference.oracle.ernie45_vl.resize_targets",
    "mimo": "reference.oracle.qwen.resize_targets",
    "glm4v": "reference.oracle.glm4v.resize_targets",
    "minicpmv": "reference.oracle.minicpm_v.targets",
}
WORKED = {  # where each rule turns (semantics §18.2, §18.4)
    "qwen": [(1, 1), (42, 70), (70, 42), (56, 56), (200, 1), (201, 1), (3584, 3626), (28, 5600), (4096, 4096)],
    "internvl": [(448, 448), (224, 224), (896, 448), (1344, 448), (800, 800), (1000, 1000), (3000, 1000), (7, 2),
                 (2, 7), (500, 1000)],
    "paddleocr": [(1, 1), (1, 200), (200, 1), (1, 5600), (27, 5401), (20, 30), (1000, 800), (3000, 4000)],
    "ernie": [(1, 1), (98, 1), (10, 400), (1, 201), (201, 1), (1920, 1080), (3000, 4000), (4096, 4096)],
    "mimo": [(1, 1), (6, 1), (1, 201), (201, 1), (20, 30), (1000, 800), (1920, 1080), (4096, 4096)],
    "glm4v": [(1, 1), (1, 200), (1, 201), (6, 1), (112, 112), (70, 42), (1920, 1080), (4000, 3000), (4096, 4096)],
    "minicpmv": [(1, 1), (448, 448), (449, 448), (896, 448), (448, 896), (1344, 448), (1000, 1000), (1920, 1080),
                 (4096, 1), (1, 4096), (4096, 4096)],
}  # fmt: skip
SPOT_RANDOM = 200
REDUCED_RANDOM = 1500  # random sizes of the interpreted fallback (with every size up to 48 and the boundaries)
_SWEEPS: dict[tuple[str, ...], gs.Sweep] = {}  # one sweep per function, arguments and config (columns share one)


def kind_of(cfg: Any) -> str:
    """The family kind of ``cfg`` (its type declares it: `reference.system.family_configs`) when it has a geometry."""
    kind = getattr(cfg, "kind", None)
    if kind not in OUTPUTS:
        raise TypeError(f"no geometry for a {type(cfg).__name__}: the family is judged on normalization only")
    return kind


def _resized_grid(resize_targets: Callable[..., Any], cfg: Any, ws: np.ndarray, hs: np.ndarray) -> np.ndarray:
    """(2, n) served widths and heights of a family whose trained geometry is one resize target (Qwen's rule,
    PaddleOCR-VL's, ERNIE-4.5-VL's, GLM-4.1V's ``resize_targets``): a refused size (0) as `gc.REFUSED`."""
    new_h, new_w = resize_targets(hs, ws, cfg)
    found = np.stack([new_w, new_h])
    return np.where(found == 0, gc.REFUSED, found)


_qwen_grid = partial(_resized_grid, qwen.resize_targets)


def _minicpmv_grid(cfg: Any, ws: np.ndarray, hs: np.ndarray) -> np.ndarray:
    src_h, src_w, rows, cols, piece_h, piece_w = minicpm_v.targets(hs, ws, cfg)
    return np.stack([src_w, src_h, rows, cols, piece_w, piece_h])  # no size is refused


def _internvl_grid(cfg: Any, ws: np.ndarray, hs: np.ndarray) -> np.ndarray:
    cols, rows, tiles = internvl.tiles_array(ws, hs, cfg)
    s = cfg.image_size
    return np.stack([np.asarray(cols, np.int64) * s, np.asarray(rows, np.int64) * s, np.asarray(tiles, np.int64)])


# per family kind: the sides whose multiples (+-1) are its boundaries, and the vectorized oracle
STEPS = {
    "qwen": lambda cfg: (cfg.patch_size, cfg.factor),
    "internvl": lambda cfg: (cfg.image_size // 2, cfg.image_size),
    "paddleocr": lambda cfg: (cfg.patch_size, cfg.factor),
    "ernie": lambda cfg: (cfg.patch_size, cfg.factor),
    "mimo": lambda cfg: (cfg.patch_size, cfg.factor),
    "glm4v": lambda cfg: (cfg.patch_size, cfg.factor),
    "minicpmv": lambda cfg: (cfg.patch_size * cfg.merge, cfg.scale_resolution),
}
GRIDS = {
    "qwen": _qwen_grid,
    "internvl": _internvl_grid,
    "paddleocr": partial(_resized_grid, paddleocr.resize_targets),
    "ernie": partial(_resized_grid, ernie45_vl.resize_targets),
    "mimo": lambda cfg, ws, hs: _qwen_grid(cfg.qwen, ws, hs),
    "glm4v": partial(_resized_grid, glm4v.resize_targets),
    "minicpmv": _minicpmv_grid,
}


def steps(cfg: Any) -> tuple[int, ...]:
    """The sides whose multiples (+-1) are the family's boundaries."""
    return STEPS[kind_of(cfg)](cfg)


def oracle_grid(cfg: Any, ws: np.ndarray, hs: np.ndarray) -> np.ndarray:
    """int64 (K, *broadcast shape): the vectorized oracle, `REFUSED` where the checkpoint refuses the size."""
    return GRIDS[kind_of(cfg)](cfg, ws, hs)


def path_row(path: Any, cfg: Any, w: int, h: int) -> list[int]:
    """The path's own ``geometry`` as the compared values; every value `REFUSED` where it raises."""
    try:
        g = path.geometry(w, h, cfg)
    except Exception:  # noqa: BLE001 - a refusal (or a failure) is compared, never raised
        return [gc.REFUSED] * len(OUTPUTS[kind_of(cfg)])
    row = [int(g.width), int(g.height)]
    if kind_of(cfg) == "minicpmv":  # MiniCPM-V's grid: (rows, cols, slice width, slice height)
        return row + [int(v) for v in g.grid]
    return row + [int(g.grid[2])] if len(OUTPUTS[kind_of(cfg)]) > len(row) else row  # InternVL's: the tiles too


@dataclass
class Target:
    """The engine function a path's geometry rests on and its arguments; ``fn`` None when there is none to
    compile (``why``)."""

    function: str
    fn: Callable[..., Any] | None
    call: gc.Call | None
    args: tuple[Any, ...]
    why: str = ""
    then: Callable[[np.ndarray], np.ndarray] | None = None  # a second stage on the function's (K, ...) outputs


def _qualified(fn: Callable[..., Any], where: str, name: str) -> str:
    own = f"{fn.__module__}.{fn.__qualname__}"
    version = getattr(sys.modules.get(fn.__module__.split(".")[0]), "__version__", None)
    text = f"{where}.{name}" + (f" (= {own})" if own != f"{where}.{name}" else "")
    return text + (f" [{fn.__module__.split('.')[0]} {version}]" if version else "")


def engine_target(engine: str, path: Any, cfg: Any) -> Target:
    """The function ``path`` (of ``engine``) computes its geometry with (module docstring), as the engine's plugin
    names it (``hooks.geometry_function``); a path that says why none can be compiled (``geometry_note``, an
    engine plugin's) runs interpreted."""
    staged = getattr(path, "staged_geometry", None)
    if callable(staged):  # the path names its function and any stage after it (SGLang's ERNIE-4.5-VL, MiMo-V2.5)
        try:
            module, name, fn, args, then = staged(cfg)
        except gc.CompileError as e:  # its second stage cannot be compiled: the path's geometry, interpreted
            return Target(f"{path.system} (through the path's own geometry)", None, None, (), str(e))
        text = _qualified(fn, module, name) + (" then the checkpoint processor's resize of its target" if then else "")
        return Target(text, fn, CALLS[kind_of(cfg)], args, then=then)
    note = getattr(path, "geometry_note", None)
    if note is not None:
        return Target(f"{path.system} (through the path's own geometry)", None, None, (), note)
    found = importlib.import_module(engine_facts(engine).hooks).geometry_function(path, cfg)
    if len(found) == 2:  # (what runs, why nothing is compiled)
        return Target(found[0], None, None, (), found[1])
    module, name, fn, args = found
    return Target(_qualified(fn, module, name), fn, CALLS[kind_of(cfg)], args)


def spot_sizes(kind: str, cfg: Any, seed: int = 29) -> tuple[np.ndarray, np.ndarray]:
    """The worked sizes, 64 boundary pairs and `SPOT_RANDOM` random sizes up to `MAX_SIDE`."""
    rng = np.random.default_rng(seed)
    edge = gc.boundary_sides(steps(cfg), MAX_SIDE)
    both = np.concatenate(
        [np.asarray(WORKED[kind]), rng.choice(edge, (64, 2)), rng.integers(1, MAX_SIDE + 1, (SPOT_RANDOM, 2))]
    )
    both = both[(both <= MAX_SIDE).all(axis=1)].astype(np.int64)
    return both[:, 0], both[:, 1]


def reduced_sizes(kind: str, cfg: Any) -> tuple[np.ndarray, np.ndarray]:
    """The interpreted fallback's sizes: the worked sizes first, then `compiled.check_sizes` with
    `REDUCED_RANDOM` random sizes."""
    cw, ch = gc.check_sizes(steps(cfg), MAX_SIDE, n_random=REDUCED_RANDOM)
    worked = np.asarray(WORKED[kind], np.int64)
    return np.concatenate([worked[:, 0], cw]), np.concatenate([worked[:, 1], ch])


@dataclass
class Exhaustive:
    """The exhaustive part's result for one engine's paths of a family: the sweep, the spot check, the size to pin
    (the first difference, or None)."""

    sweep: gs.Sweep
    spot: list[str]
    kind: str
    shared: bool = False  # the sweep of an earlier column of the session (same function, arguments and config)

    @property
    def counterexample(self) -> tuple[int, int] | None:
        return self.sweep.first

    def evidence(self) -> str:
        text = self.sweep.evidence(ORACLE[self.kind], OUTPUTS[self.kind])
        if self.shared:
            text += " [swept once for an earlier column: the same function, arguments and config]"
        if self.spot:
            text += f"; the swept function differs from the path's own geometry at {'; '.join(self.spot[:2])}"
        return text


def exhaustive(engine: str, paths: Sequence[Any], cfg: Any) -> Exhaustive | None:
    """C13's exhaustive sweep for ``paths`` (one engine's paths of one family; they share one geometry
    function, checked on each path's own geometry); None when no path has one (normalization-only family)."""
    if not paths:
        return None
    kind = kind_of(cfg)
    oracle = partial(oracle_grid, cfg)
    if gc.numba_missing() is not None:
        note = f"the compiled sweep {gc.numba_missing()}; the claim decides on the drawn sizes"
        return Exhaustive(gs.Sweep("the engine's geometry function", "skipped", note=note), [], kind)
    t0 = time.perf_counter()
    target = engine_target(engine, paths[0], cfg)
    sw, sh = spot_sizes(kind, cfg)
    spot: list[str] = []
    if target.fn is not None:
        theirs = gc.evaluate(gc.interpreted(target.fn, target.call, target.args), sw, sh)
        theirs = target.then(theirs) if target.then is not None else theirs
        for p in paths:
            own = gc.evaluate(partial(path_row, p, cfg), sw, sh)
            spot += gc.disagreements(theirs, own, sw, sh, f"function vs {p.name}")
    key = (engine, target.function, str(target.call), str([list(a) if not np.isscalar(a) else a for a in target.args]),
           repr(cfg), str(id(target.fn)) if target.fn is not None else paths[0].name)  # fmt: skip
    if key in _SWEEPS:
        return Exhaustive(_SWEEPS[key], spot, kind, shared=True)
    found = (
        staged_sweep(target, oracle, cfg, kind, paths[0])
        if target.then is not None
        else gs.sweep_function(
            target.fn,
            target.call,
            target.args,
            target.function,
            oracle,
            steps=steps(cfg),
            max_side=MAX_SIDE,
            fallback=partial(path_row, paths[0], cfg),
            reduced=lambda: reduced_sizes(kind, cfg),
            why_not=target.why,
        )
    )
    found.seconds = time.perf_counter() - t0
    _SWEEPS[key] = found
    return Exhaustive(found, spot, kind)


def staged_sweep(target: Target, oracle: gc.Grid, cfg: Any, kind: str, path: Any) -> gs.Sweep:
    """`geometry_sweep.sweep_function` for a target with a second stage: the function compiled (trusted once equal
    to the interpreted one on the check sizes), its grid through ``target.then``, against ``oracle`` at every size;
    else the path's own geometry on the reduced sizes, saying why."""
    assert target.fn is not None and target.call is not None and target.then is not None
    why, found_compiled, checked = "", None, 0
    try:
        found_compiled = gc.compile_call(target.fn, target.call, target.args, target.function)
    except gc.CompileError as e:
        why = str(e)
    if found_compiled is not None:
        cw, ch = gc.check_sizes(steps(cfg), MAX_SIDE)
        checked = int(cw.size)
        scalar = gc.interpreted(target.fn, target.call, target.args)
        bad = gc.disagreements(found_compiled.pairs(cw, ch), gc.evaluate(scalar, cw, ch), cw, ch, "")
        if bad:
            found_compiled, why = None, f"the compiled function disagrees with the interpreted one at {bad[0]}"
    then = target.then
    if found_compiled is not None:
        grid = found_compiled.grid
        tally = gc.sweep_grids([lambda ws, hs: then(grid(ws, hs))], oracle, MAX_SIDE)[0]
        found = gs.Sweep(target.function, "compiled", sizes=MAX_SIDE * MAX_SIDE, checked=checked)
    else:
        rw, rh = reduced_sizes(kind, cfg)
        tally = gc.Tally()
        tally.add(rw, rh, gc.evaluate(partial(path_row, path, cfg), rw, rh), oracle(rw, rh))
        found = gs.Sweep(target.function, "interpreted-reduced", sizes=int(rw.size), note=f"not compiled because {why}")
    found.mismatches = tally.count
    if tally.found:
        w, h, found.engine, found.oracle = tally.found[0]
        found.first = (w, h)
    return found
