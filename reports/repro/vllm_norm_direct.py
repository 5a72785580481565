"""C15's reproducer for a vLLM class that builds ``FusedMMInputNorm`` itself (semantics §18.9: Nemotron VL's
embedding model, Nano Nemotron VL), where `families.vllm_c15` fits only ``build_mm_input_norm``'s rows.

Why a template of its own: these classes never read the checkpoint's processor config; they pass
``FusedMMInputNorm(image_mean=..., image_std=..., rescale_factor=...)`` arguments of their own (vLLM's SigLIP
constants; ``config.json``'s ``norm_mean`` / ``norm_std``). The file states the trained side (the checkpoint's
published statistics, §18.1's float32 table) and takes the served side from the release at run time: it finds the
class's own ``FusedMMInputNorm(...)`` call in its module's source and evaluates that call as the class does, in
the module's namespace with ``config`` the checkpoint's ``config.json``. So it follows the release: other
constants, a call reading the checkpoint, or another arithmetic in ``forward_native`` change what it sees, and
it passes once the served values are the checkpoint's. The class and its module come from the row's provenance
(``built with the arguments <Class>'s own call passes (<file>.py, ...)``, what deferlab's run recorded).
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Mapping
from typing import Any

from deferlab.reference.system.families import FAMILIES
from deferlab.reference.system.family_configs import PROFILES, published_config
from deferlab.reports.repro import families
from deferlab.reports.repro import family_texts as texts

# What deferlab's run records for such a class (its provenance's ``normalize`` step).
OWN_CALL = re.compile(r"built with the arguments (\w+)'s own call passes \((vllm(?:/\w+)+)\.py")

IMPORTS = """
import ast
import types

import numpy as np
import torch

from vllm.config import CompilationConfig, set_current_vllm_config
"""

SERVED = '''

def _own_call():
    """MODEL_CLASS's own ``FusedMMInputNorm(...)`` call, found in its module's source (the release's file, parsed:
    the first such call in the class body)."""
    with open(served_module.__file__, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == MODEL_CLASS:
            for call in ast.walk(node):
                func = getattr(call, "func", None)
                if isinstance(call, ast.Call) and "FusedMMInputNorm" in (getattr(func, "id", None), getattr(func, "attr", None)):
                    return call
    raise LookupError(
        f"{MODEL_CLASS} ({served_module.__name__}) builds no FusedMMInputNorm itself in this release: this "
        "reproducer cannot say what it serves (its norm may come from build_mm_input_norm now)"
    )


def _served_norm():
    """The norm MODEL_CLASS builds on vLLM's default path (mm_device_do_normalize on, as the class declares
    supports_mm_device_do_normalize): its own call evaluated as its __init__ evaluates it, in its module's
    namespace (the constants the module defines or imports, FusedMMInputNorm itself), with ``config`` the
    checkpoint's config.json (the hf_config, which the class names ``config``). A custom op's constructor asks
    for the current vLLM config: a bare one stands in."""
    call = _own_call()
    scope = {**vars(served_module), "config": types.SimpleNamespace(**CONFIG)}
    code = compile(ast.Expression(call), served_module.__file__, "eval")
    print(f"{MODEL_CLASS} builds {ast.unparse(call)}")
    with set_current_vllm_config(types.SimpleNamespace(compilation_config=CompilationConfig())):
        return eval(code, scope)


def _served_levels():
    """What that norm gives every level of every channel (3, 256): FusedMMInputNorm.forward_native (the CPU path;
    CUDA runs a Triton kernel) from uint8 into float32, one input in the norm's own layout (a patch of 3 x 256
    levels for "pcl", a 16x16 image per channel for "bchw")."""
    norm = _served_norm()
    u = torch.arange(256, dtype=torch.uint8)
    bchw = getattr(norm, "layout", "pcl") == "bchw"
    x = u.reshape(1, 1, 16, 16).expand(1, 3, 16, 16) if bchw else u.repeat(3).reshape(1, 768)
    return norm.forward_native(x.contiguous(), torch.float32).float().numpy().reshape(3, 256)
'''


def own_call(row: Mapping[str, Any]) -> tuple[str, str] | None:
    """(class, module) of a row whose norm the class builds itself, from its provenance (None: the row's norm came
    from ``build_mm_input_norm``, or the provenance does not say)."""
    for text in (row.get("provenance") or {}).values():
        m = OWN_CALL.search(str(text))
        if m is not None:
            return m.group(1), m.group(2).replace("/", ".")
    return None


def _config_consts(family: str, cls: str) -> str:
    """The checkpoint's config as deferlab publishes it, with its source, and the class under test."""
    said = f"The checkpoint's config.json as deferlab publishes it ({family!r} profile), the class's hf_config. "
    said += f"Its source: {PROFILES[family][1]}"
    lines = textwrap.wrap(said, 110, initial_indent="# ", subsequent_indent="#   ", break_on_hyphens=False)
    return (
        "\n".join(lines) + f"\nCONFIG = {published_config(family)!r}\n"
        f"MODEL_CLASS = {cls!r}  # the model class whose own FusedMMInputNorm call serves the family\n"
        "# The trained side: the checkpoint's rescale and normalize in float32 (semantics §18.1; a checkpoint's own\n"
        "# ToTensor then Normalize gives the same values at all 256 levels, §18.7):\n"
    )


def vllm_c15_direct(c: families.Column, ce: Any, failure: str, row: Mapping[str, Any]) -> tuple[str, str, str] | None:
    """(imports, constants, body) of C15's file for a family whose vLLM class builds its own norm, or None."""
    found = own_call(row)
    if c.path is not None or found is None or c.family not in FAMILIES or c.family not in PROFILES:
        return None
    if "differ from the checkpoint in FP32" not in failure:
        return None
    cls, module = found
    imports = IMPORTS + f"\nimport {module} as served_module  # the class's module: its own call is under test\n"
    consts = _config_consts(c.family, cls) + families._norm_consts(c.family)
    return imports, consts, SERVED + texts.TRAINED_LEVELS
