"""SGLang's MiniCPM-V 4.6 processor (``processors/minicpmv4_6.py``) as a normalization-only `FamilyPath`
(semantics §18.9).

Why its own path: SGLang does not run the checkpoint's processor for MiniCPM-V 4.6; its
``MiniCPMV4_6MultimodalProcessor`` builds its own ``MiniCPMV4_6ImageProcessor`` (torch: slice grid, resize,
``t * rescale_factor`` then ``(t - mean) / std``, NaViT packing), with the mean, std and rescale factor of that
class's defaults (0.5, 0.5, 1/255), whatever the checkpoint's config says. Here the multimodal processor's own
``__init__`` runs (the base class's answered as `common.construct` does, a tokenizer stand-in that knows no token),
and its own ``_preprocess_images`` serves a level image whose size the slicing keeps (448 x 448: one piece, no
resize), read back through the packing.

Geometry (C13): `geometry` calls the image processor's own ``_get_sliced_grid``, ``_find_best_resize`` and
``_get_refine_size`` on the instance the multimodal processor built, as its ``preprocess`` calls them, and counts
the pad tokens its own ``_expand_frame`` writes. For the exhaustive sweep, `staged_geometry` compiles those three
methods from their own source with ``self`` a named tuple of the instance's settings (``self._find_best_resize(``
read as a call of the compiled method with ``self`` first: the one change numba needs), inside deferlab's driver
of ``preprocess``'s order. The pixels (torchvision's float resize) are not restated (C14 ``n/a``).
"""

from __future__ import annotations

import ast
import collections
import inspect
import textwrap
import types
from typing import Any

import numpy as np
import torch
from PIL import Image

from deferlab.impl import compiled
from deferlab.impl.sglang.families import common
from deferlab.reference.system.served import Geometry
from deferlab.reference.system.validate import check_positive_int

MODULE = "sglang.srt.multimodal.processors.minicpmv4_6"
SIDE = 448  # the class's scale_resolution: a square of it is one piece at its own size (no slicing, no resize)
METHODS = ("_get_sliced_grid", "_find_best_resize", "_get_refine_size")  # the geometry preprocess calls
GEOMETRY_NAME = "MiniCPMV4_6ImageProcessor._get_sliced_grid/_find_best_resize/_get_refine_size"
# the driver returns (source h, source w, rows, cols, slice h, slice w); compared: width, height, rows, cols, slice w, h
CALL = compiled.Call("f(h, w, a0)", ("r[1]", "r[0]", "r[2]", "r[3]", "r[5]", "r[4]"))
Settings = collections.namedtuple("Settings", ("max_slice_nums", "scale_resolution", "patch_size"))


class _SelfCalls(ast.NodeTransformer):
    """``self.m(args)`` for a geometry method ``m`` becomes ``m(self, args)`` (numba calls no method of a tuple)."""

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        f = node.func
        if isinstance(f, ast.Attribute) and f.attr in METHODS and getattr(f.value, "id", None) == "self":
            node.func, node.args = ast.Name(f.attr, ast.Load()), [ast.Name("self", ast.Load()), *node.args]
        return node


def _driver(h: int, w: int, self: Any) -> tuple[int, int, int, int, int, int]:
    """deferlab's driver of ``preprocess``'s geometry (its order, its arguments), run in the namespace of the
    engine's methods: (source h, source w, rows, cols, slice h, slice w), zeros where the image is not sliced."""
    grid = _get_sliced_grid(self, (h, w))  # noqa: F821 - the engine's method, bound in the driver's namespace
    if grid is None:
        src_h, src_w = _find_best_resize(self, (h, w), True)  # noqa: F821
        return src_h, src_w, 0, 0, 0, 0
    src_h, src_w = _find_best_resize(self, (h, w), False)  # noqa: F821
    grid_y, grid_x = grid
    refine_h, refine_w = _get_refine_size(self, (h, w), (grid_y, grid_x), True)  # noqa: F821
    return src_h, src_w, grid_y, grid_x, refine_h // grid_y, refine_w // grid_x


class MiniCPMV46Path(common.NormOnlyPath):
    """SGLang's MiniCPM-V 4.6 image path: its own image processor, judged on what it gives each level."""

    family = "minicpm-v-4.6"

    not_restated = "its pixels (torchvision's float resize) are not restated"
    judged_claims = ("C13",)  # its slicing geometry and tokens (C13); its pixels are not restated (C14 n/a)

    def processor(self) -> Any:
        """``MiniCPMV4_6MultimodalProcessor`` built by its own ``__init__`` (patch 14, downsample 16x: the
        defaults it reads off the model config; token ids it cannot resolve stay None)."""

        def build() -> Any:
            hf_config = types.SimpleNamespace(
                vision_config=types.SimpleNamespace(patch_size=14), image_token_id=None, video_token_id=None
            )
            tokenizer = types.SimpleNamespace(convert_tokens_to_ids=lambda tokens: [None] * len(tokens))
            cls = self.module.MiniCPMV4_6MultimodalProcessor
            return common.construct(self.source, cls, hf_config, types.SimpleNamespace(), tokenizer)

        return self.cached("processor", build)

    def geometry(self, width: int, height: int, cfg: Any) -> Geometry:
        """The source size, (rows, cols, slice width, slice height) and the pad tokens of the prompt, from the
        processor's own methods as ``preprocess`` calls them (``cfg`` is not read: SGLang's settings are its own)."""
        width, height = check_positive_int("width", width), check_positive_int("height", height)
        proc = self.processor()
        ip = proc.image_processor
        grid = ip._get_sliced_grid((height, width)) if ip.slice_mode else None
        src_h, src_w = ip._find_best_resize((height, width), allow_upscale=grid is None)
        p, rows, cols, piece_h, piece_w = ip.patch_size, 0, 0, 0, 0
        sizes = [[src_h // p, src_w // p]]
        if grid is not None:
            refine_h, refine_w = ip._get_refine_size((height, width), grid, allow_upscale=True)
            rows, cols = grid
            piece_h, piece_w = refine_h // rows, refine_w // cols
            sizes += [[piece_h // p, piece_w // p]] * (rows * cols)
        flat = list(grid) if grid is not None else [0, 0]
        # 0.5.23 passes the pad divisor (the image processor's); 0.5.17-0.5.22 read the multimodal processor's own
        divisor = (ip.pad_divisor,) if "pad_divisor" in inspect.signature(proc._expand_frame).parameters else ()
        text = proc._expand_frame(sizes, flat, *divisor)
        return Geometry(src_w, src_h, (rows, cols, piece_w, piece_h), text.count(self.module._PAD_PLACEHOLDER))

    def staged_geometry(self, cfg: Any) -> tuple[str, str, Any, tuple[Any, ...], None]:
        """(module, name, driver, (settings,), no second stage) for C13's exhaustive sweep: the three methods
        rebuilt from their own source in a copy of their module's globals (`_SelfCalls`), the driver there."""
        ip = self.processor().image_processor
        if not ip.slice_mode:
            raise compiled.CompileError(f"{self.name}: slice_mode off, which the driver does not follow")
        namespace = dict(vars(self.module))
        helper = self.module._ensure_divide
        namespace["_ensure_divide"] = types.FunctionType(helper.__code__, namespace, helper.__name__)
        cls = type(ip)
        for name in METHODS:
            fn = getattr(cls, name)
            tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
            node = tree.body[0]
            node.decorator_list, node.returns = [], None  # type: ignore[attr-defined]
            tree = ast.fix_missing_locations(_SelfCalls().visit(tree))
            exec(compile(tree, inspect.getsourcefile(fn) or MODULE, "exec"), namespace)  # noqa: S102 - its own source
        driver = types.FunctionType(_driver.__code__, namespace, "_driver")
        driver.__qualname__ = GEOMETRY_NAME.split(".", 1)[1]
        driver.__module__ = f"{MODULE}.MiniCPMV4_6ImageProcessor"
        settings = Settings(int(ip.max_slice_nums), int(ip.scale_resolution), int(ip.patch_size))
        return f"{MODULE}.MiniCPMV4_6ImageProcessor", GEOMETRY_NAME.split(".", 1)[1], driver, (settings,), None

    def levels(self, cfg: Any) -> np.ndarray:
        """(3, 256): what the path gives each level (``cfg``'s statistics are not read: SGLang's are its own)."""
        image = common.level_image(SIDE, SIDE)
        proc = self.processor()
        # 0.5.23 hands the image processor in (_image_processor_for); 0.5.17-0.5.22 use their own attribute
        handed = len(inspect.signature(proc._preprocess_images).parameters) == 2
        extra = (proc.image_processor,) if handed else ()
        with common.cpu_engine(self.source):
            pixel_values, sizes, grids = proc._preprocess_images([Image.fromarray(image)], *extra)
        if len(pixel_values[0]) != 1 or list(grids[0]) != [0, 0]:
            raise RuntimeError(f"{self.name}: a {SIDE}x{SIDE} image was sliced ({grids[0]}): levels unreadable")
        values = pixel_values[0][0]
        if self.dtype == "bfloat16":
            values = values.to(torch.bfloat16)  # the model's cast to the tower's dtype, modelled as .to
        p = proc.image_processor.patch_size
        rows, cols = (int(s) for s in sizes[0][0])
        # (C, p, rows*cols*p): patch b's row i at [:, i, b*p:(b+1)*p], patches row-major over the image
        canvas = common.widen(values).reshape(3, p, rows, cols, p).transpose(0, 2, 1, 3, 4).reshape(3, SIDE, SIDE)
        return common.canvas_levels(canvas, image, self.name)

    def provenance(self) -> dict[str, str]:
        cls = f"{MODULE}.MiniCPMV4_6MultimodalProcessor"
        return {
            "processor": f"{cls}.__init__ (own; the base class's __init__ answered by deferlab, a tokenizer stand-in)",
            "serve": f"{cls}._preprocess_images -> {MODULE}.MiniCPMV4_6ImageProcessor.preprocess (own: "
            "_to_chw_tensor, _resize, _normalize, _reshape_by_patch)",
            "geometry": f"{MODULE}.MiniCPMV4_6ImageProcessor._get_sliced_grid, _find_best_resize, _get_refine_size "
            "(own, as preprocess calls them); tokens: MiniCPMV4_6MultimodalProcessor._expand_frame's pads",
            "cast": "the model's cast to the tower's dtype, modelled as .to(bfloat16)"
            if self.dtype == "bfloat16"
            else "none (float32: the processor's own values)",
        }
