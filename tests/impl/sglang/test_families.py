"""`impl.sglang.families`: SGLang's own processors of InternVL, Kimi-K2.5 and Qwen-VL as `FamilyPath`s.

What is checked against what: InternVL's tile counts against the model card's rule worked out here (SGLang
breaks aspect-ratio ties toward the largest grid, the card toward the smallest unless the image is large),
its values against bfloat16, its prompt tokens against its geometry; Kimi-K2.5's served patches against
``F.interpolate(bicubic, antialias=True)`` + round + clamp mapped through the path's own level table; every
level table against the exact normalization within one bfloat16 rounding. The Qwen paths need the release's
transformers and torchvision, which cannot join this process (it imported deferlab's transformers long ago):
they run in a child (`family_child`).
"""

from __future__ import annotations

import types

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from PIL import Image

from deferlab.impl.sglang.families import family_path
from deferlab.impl.sglang.sources import SGLangSourceError
from deferlab.reference.system.config import PreprocessConfig
from deferlab.reference.system.errors import InputTypeError, InputValueError
from deferlab.reference.system.family_configs import family_profile
from deferlab.reference.system.profiles import profile
from deferlab.reference.system.served import FamilyPath
from tests.impl.sglang.support import default_spec, fake_sglang_tree, run_child

INTERNVL = family_profile("internvl")
K25 = profile("kimi-k2.5")
BF16_ROUNDING = 2.0**-8  # bfloat16 keeps 8 significant bits: one rounding moves a value by at most this, relatively
# (width, height, SGLang 0.5.23's tiles, the model card's tiles), thumbnail included
TILES = ((448, 448, 10, 1), (896, 448, 9, 3), (1344, 448, 13, 4), (1000, 1000, 10, 10), (640, 480, 13, 13))


def card_tiles(width: int, height: int, max_num: int = 12, size: int = 448) -> int:
    """The InternVL model card's ``dynamic_preprocess`` tile count, worked out here: grids sorted by tile count,
    the closest aspect ratio wins, and an exact tie replaces the best only when the image's area exceeds half
    the candidate canvas's; one thumbnail when more than one tile."""
    grids = {
        (i, j) for n in range(1, max_num + 1) for i in range(1, n + 1) for j in range(1, n + 1) if i * j <= max_num
    }
    best, best_diff = (1, 1), float("inf")
    for i, j in sorted(grids, key=lambda g: g[0] * g[1]):
        diff = abs(width / height - i / j)
        if diff < best_diff:
            best, best_diff = (i, j), diff
        elif diff == best_diff and width * height > 0.5 * size * size * i * j:
            best = (i, j)
    n = best[0] * best[1]
    return n + (1 if n > 1 else 0)


@pytest.fixture(scope="module")
def internvl(sgl):
    return family_path(sgl, "internvl")


@pytest.fixture(scope="module")
def kimi(sgl):
    return family_path(sgl, "kimi-k3")


@pytest.fixture(scope="module")
def internvl_served(internvl):
    """SGLang's InternVL request entry on one random image of each size of `TILES`."""
    rng = np.random.default_rng(3)
    images = [Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)) for w, h, *_ in TILES]
    return internvl.run(images, INTERNVL)


def _bf16_exact(values: np.ndarray) -> bool:
    return np.array_equal(torch.from_numpy(values).bfloat16().float().numpy(), values)


def _within_one_rounding(levels: np.ndarray, exact: np.ndarray) -> float:
    return float(np.max(np.abs(levels - exact) / np.maximum(np.abs(exact), BF16_ROUNDING)))


def test_the_paths_are_family_paths_of_sglang(internvl, kimi, sgl):
    for path, family in ((internvl, "internvl"), (kimi, "kimi-k3")):
        assert isinstance(path, FamilyPath)
        got = (path.family, path.label, path.path, path.system, path.dtype, path.real_code)
        assert got == (family, "SGLANG", "served", sgl.name, "bfloat16", True)


@pytest.mark.parametrize(("width", "height", "sglang", "card"), TILES)
def test_internvl_tiles_break_ties_toward_the_largest_grid(internvl, width, height, sglang, card):
    assert card_tiles(width, height) == card  # the hand-worked rule gives the card's published behaviour
    g = internvl.geometry(width, height, INTERNVL)
    if default_spec() == "0.5.23":
        assert g.grid[2] == sglang
    rows, cols, n = g.grid
    assert (g.width, g.height) == (cols * 448, rows * 448) and n == rows * cols + (rows * cols > 1)
    assert g.tokens == 256 * n and g.pad == (0, 0)


def test_internvl_serves_bfloat16_tiles_and_the_prompt_its_geometry_says(internvl, internvl_served):
    values, grid, tokens = internvl_served
    geometry = [internvl.geometry(w, h, INTERNVL) for w, h, *_ in TILES]
    assert [tuple(g) for g in grid.tolist()] == [g.grid for g in geometry]
    assert tokens == [g.tokens for g in geometry] == [256 * int(n) for n in grid[:, 2]]
    assert values.dtype == np.float32 and values.shape == (int(grid[:, 2].sum()), 3, 448 * 448)
    assert _bf16_exact(values)


def test_internvl_levels_are_imagenet_normalization_in_bfloat16(internvl):
    levels = internvl.levels(INTERNVL)
    exact = (np.arange(256) / 255 - np.asarray(INTERNVL.image_mean)[:, None]) / np.asarray(INTERNVL.image_std)[:, None]
    assert levels.shape == (3, 256) and levels.dtype == np.float32
    assert np.all(np.diff(levels, axis=1) > 0)
    assert _within_one_rounding(levels, exact) <= BF16_ROUNDING and _bf16_exact(levels)


def test_kimi_k25_levels_are_its_normalization_in_bfloat16(kimi):
    levels = kimi.levels(K25)
    exact = (np.arange(256) / 255 - np.asarray(K25.image_mean)[:, None]) / np.asarray(K25.image_std)[:, None]
    assert levels.shape == (3, 256) and np.all(np.diff(levels, axis=1) > 0)
    assert _within_one_rounding(levels, exact) <= BF16_ROUNDING and _bf16_exact(levels)


def test_kimi_k25_resize_is_antialiased_bicubic_rounded_and_clamped(kimi):
    """A 100x60 image under a 16-patch budget: NaViT shrinks it to 75x45 and pads to 84x56. Every served value
    must be the path's own level value of what F.interpolate(bicubic, antialias=True) + round + clamp gives (the
    padding: level 0)."""
    cfg = PreprocessConfig(in_patch_limit=16, image_mean=K25.image_mean, image_std=K25.image_std)
    image = np.random.default_rng(5).integers(0, 256, (60, 100, 3), dtype=np.uint8)
    values, grid, tokens = kimi.run([Image.fromarray(image)], cfg)
    g = kimi.geometry(100, 60, cfg)
    assert (g.width, g.height, g.pad, g.grid) == (75, 45, (9, 11), (1, 4, 6)) and tokens == [g.tokens] == [6]
    assert grid.tolist() == [[1, 4, 6]]
    src = torch.from_numpy(image).permute(2, 0, 1)[None].float()
    resized = F.interpolate(src, size=(45, 75), mode="bicubic", align_corners=False, antialias=True)
    want_levels = np.zeros((3, 56, 84), dtype=np.int64)
    want_levels[:, :45, :75] = resized.round().clamp(0, 255)[0].numpy().astype(np.int64)
    table = kimi.levels(cfg)
    want = np.take_along_axis(table, want_levels.reshape(3, -1), axis=1).reshape(3, 56, 84)
    served = values.reshape(4, 6, 3, 14, 14).transpose(2, 0, 3, 1, 4).reshape(3, 56, 84)
    np.testing.assert_array_equal(served, want)
    plain = F.interpolate(src, size=(45, 75), mode="bicubic", align_corners=False).round().clamp(0, 255)
    assert not torch.equal(plain, resized.round().clamp(0, 255))  # the image is one antialiasing tells apart


def test_provenance_names_the_engine_functions_and_what_is_modelled(internvl, kimi):
    iv, k = internvl.provenance(), kimi.provenance()
    assert "InternVLProcessor.process_mm_data_async" in iv["serve"] and "dynamic_preprocess" in iv["tiling"]
    assert "SGLANG_USE_CPU_ENGINE" in iv["device"] and "meta tensor" in iv["geometry"]
    assert "_gpu_preprocess_images" in k["serve"] and "_resize_bicubic_if_needed" in k["resize"]
    assert "normalize_and_patchify" in k["normalize"] and "Triton" in k["normalize"]
    assert k["dispatch"].startswith("modelled") and "torch.cuda.is_available() -> True" in k["dispatch"]
    assert all(isinstance(v, str) and v for v in (*iv.values(), *k.values()))


@pytest.mark.parametrize("family", ["internvl", "kimi-k3"])
def test_a_release_without_the_family_processor_is_refused_in_one_line(tmp_path, family):
    root = fake_sglang_tree(tmp_path, "0.5.23", {"srt/multimodal/processors/kimi_k3.py": "\n"})
    source = types.SimpleNamespace(root=root / "python", spec=str(root), version="0.5.23")
    with pytest.raises(SGLangSourceError) as err:
        family_path(source, family)
    message = str(err.value)
    assert "\n" not in message and "is absent" in message and "processors/" in message


def test_bad_families_configs_and_missing_companions_are_one_line_refusals(sgl, internvl):
    with pytest.raises(InputValueError, match=r"no SGLang path for model family 'gemma3'; accepted: [a-z0-9., -]*\binternvl, kimi-k3\b") as err:  # fmt: skip
        family_path(sgl, "gemma3")
    accepted = str(err.value).split("accepted: ", 1)[1].split(", ")
    assert accepted == sorted(accepted) and {"internvl", "qwen3-vl", "mimo-v2.5"} <= set(accepted)
    with pytest.raises(InputTypeError, match="cfg must be an InternVLConfig"):
        internvl.geometry(448, 448, K25)
    with pytest.raises(SGLangSourceError, match="loaded without the companions") as err:
        family_path(sgl, "qwen3-vl")  # this process's SGLang was loaded without transformers and torchvision
    assert "\n" not in str(err.value)


@pytest.fixture(scope="module")
def qwen():
    """Both Qwen families, run in a child process that loads SGLang with its companions."""
    spec = default_spec()
    return run_child("tests.impl.sglang.family_child", spec, spec=spec, timeout=900, module=True)


@pytest.mark.extra("transformers")
@pytest.mark.parametrize(("family", "patch"), [("qwen2.5-vl", 14), ("qwen3-vl", 16)])
def test_qwen_serves_what_transformers_gives_where_sglang_runs_it(qwen, family, patch):
    got = qwen[family]
    if default_spec() == "0.5.23":
        assert qwen["companions"]["transformers"] == "5.19.0"  # the release's pin, not deferlab's 5.24.0
    assert got["attributes"] == [family, "SGLANG", "served", "bfloat16", True]
    assert got["system"] == f"sglang-{default_spec()}" or not default_spec()[0].isdigit()
    assert got["processor"] == "transformers.models.qwen2_vl.image_processing_qwen2_vl"  # the torchvision backend
    assert [g[2] for g in got["geometry"]] == got["served_grid"]
    assert [g[3] for g in got["geometry"]] == got["served_tokens"]
    assert [g[:2] for g in got["geometry"]] == got["trained_size"]  # smart_resize as the trained side states it
    patches = sum(t * h * w for t, h, w in got["served_grid"])
    assert got["values_shape"] == [patches, 3, 2 * patch * patch] and got["bf16_exact"]
    assert got["levels_shape"] == [3, 256] and got["levels_nondecreasing"]
    assert got["levels_error"] <= BF16_ROUNDING
    assert "prepare_artifact_batch" in got["provenance"]["serve"] and "modelled" in got["provenance"]["device"]


@pytest.mark.extra("transformers")
def test_paddleocr_vl_runs_the_qwen_processor_subclass_with_its_own_geometry(qwen):
    """PaddleOCR-VL (semantics §18.9): SGLang's PaddleOCRVLImageProcessor over transformers' PaddleOCR-VL image
    processor; its geometry is its own smart_resize (200 x 1 -> 5600 x 28, where Qwen2.5-VL's gives 812 x 28),
    patches (C*T, p, p)."""
    got = qwen["paddleocr-vl"]
    assert got["attributes"] == ["paddleocr-vl", "SGLANG", "served", "bfloat16", True]
    assert got["processor"] == "transformers.models.paddleocr_vl.image_processing_paddleocr_vl"
    assert [g[:2] for g in got["geometry"]] == got["trained_size"]
    assert got["one_by_200"] == [5600, 28] and qwen["qwen2.5-vl"]["one_by_200"] == [812, 28]
    assert [g[2] for g in got["geometry"]] == got["served_grid"]
    assert [g[3] for g in got["geometry"]] == got["served_tokens"]
    patches = sum(t * h * w for t, h, w in got["served_grid"])
    assert got["values_shape"] == [patches, 3, 14 * 14] and got["bf16_exact"]
    assert got["levels_shape"] == [3, 256] and got["levels_nondecreasing"]
    assert got["levels_error"] <= BF16_ROUNDING
    assert "PaddleOCRVLImageProcessor.__init__ and its parent's" in got["provenance"]["processor"]
