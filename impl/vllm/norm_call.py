"""The device norm of a vLLM model class that builds ``FusedMMInputNorm`` itself, with the arguments its source
passes (semantics §18.9).

Why: most classes call ``build_mm_input_norm``, which reads the checkpoint's processor config (`serving`). Some
construct ``FusedMMInputNorm(image_mean=..., image_std=..., rescale_factor=...)`` directly: Nemotron VL's
embedding model with vLLM's own SigLIP constants, whatever the checkpoint says; Nano Nemotron VL with its
``config.json``'s ``norm_mean`` / ``norm_std``. deferlab does not restate those values: it reads the call's
keyword expressions off the release's source and evaluates the few forms a constructor argument takes there
(literals, ``1 / 255``, ``list(NAME)`` with ``NAME`` a module constant or one imported from another release
module, ``config.KEY`` from the checkpoint file); any other form is refused in one line. The release's own
class is then built with them and run (`serving.apply`).
"""

from __future__ import annotations

import ast
import operator
import types
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from deferlab.impl.vllm import serving
from deferlab.impl.vllm.sources import Source
from deferlab.reference.system.errors import InputValueError

CLASS = "FusedMMInputNorm"
KEYS = ("image_mean", "image_std", "rescale_factor")
# A typed NormConfig written back (impl.vllm.family.config_dict) names the statistics as transformers does.
_WRITTEN_BACK = {"norm_mean": "image_mean", "norm_std": "image_std"}
_OPS = {ast.Div: operator.truediv, ast.Mult: operator.mul}


def call(root: Path, model: serving.ModelClass) -> dict[str, ast.expr] | None:
    """The keyword arguments of the ``FusedMMInputNorm(...)`` call in ``model``'s class body (None: it has none,
    and builds its norm with ``build_mm_input_norm``)."""
    node = model.node(root)
    for found in ast.walk(node) if node is not None else ():
        func = getattr(found, "func", None)
        if isinstance(found, ast.Call) and (getattr(func, "id", None) or getattr(func, "attr", None)) == CLASS:
            return {kw.arg: kw.value for kw in found.keywords if kw.arg}
    return None


def _constant(root: Path, file: str, name: str) -> Any:
    """Module constant ``name`` of the release file ``file``, following one ``from vllm.X import name``."""
    tree = serving._parsed(str(root / file))
    for stmt in tree.body if tree is not None else ():
        if isinstance(stmt, ast.Assign) and any(getattr(t, "id", None) == name for t in stmt.targets):
            return ast.literal_eval(stmt.value)
        if isinstance(stmt, ast.ImportFrom) and stmt.module and any(a.name == name for a in stmt.names):
            return _constant(root, stmt.module.replace(".", "/") + ".py", name)
    raise InputValueError(f"{file}: no module constant {name!r} to read the {CLASS} argument from")


def evaluate(expr: ast.expr, root: Path, file: str, checkpoint: Mapping[str, Any]) -> Any:
    """The value of one constructor argument (the forms the module docstring lists)."""
    if isinstance(expr, ast.Constant):
        return expr.value
    if isinstance(expr, ast.BinOp) and type(expr.op) in _OPS:
        left, right = evaluate(expr.left, root, file, checkpoint), evaluate(expr.right, root, file, checkpoint)
        return _OPS[type(expr.op)](left, right)
    if isinstance(expr, ast.Call) and getattr(expr.func, "id", None) in ("list", "tuple") and len(expr.args) == 1:
        return list(evaluate(expr.args[0], root, file, checkpoint))
    if isinstance(expr, ast.Name):
        return _constant(root, file, expr.id)
    if isinstance(expr, ast.Attribute) and getattr(expr.value, "id", None) == "config":
        key = expr.attr
        found = checkpoint.get(key, checkpoint.get(_WRITTEN_BACK.get(key, key)))
        if found is None:
            raise InputValueError(f"the checkpoint config has no {key!r}, which {file} passes to {CLASS}")
        return found
    raise InputValueError(f"{file}: {CLASS} argument {ast.unparse(expr)!r} is not a form deferlab reads")


def arguments(root: Path, model: serving.ModelClass, checkpoint: Mapping[str, Any]) -> dict[str, Any]:
    """``image_mean``, ``image_std`` and ``rescale_factor`` as ``model``'s call passes them for ``checkpoint``."""
    found = call(root, model) or {}
    missing = [k for k in KEYS if k not in found]
    if missing:
        raise InputValueError(f"{model.file}: {model.architecture}'s {CLASS} call passes no {', '.join(missing)}")
    return {k: evaluate(found[k], root, model.file, checkpoint) for k in KEYS}


def build(source: Source, model: serving.ModelClass, checkpoint: Mapping[str, Any]) -> Any:
    """The release's ``FusedMMInputNorm`` built with the arguments ``model`` passes (a ``pcl`` layout, as its
    default; a custom op's constructor asks for the current vLLM config, stood in for as `serving` does)."""
    kwargs = arguments(Path(source.root), model, checkpoint)
    compilation = source.module(serving.COMPILATION_CONFIG).CompilationConfig()
    config = types.SimpleNamespace(compilation_config=compilation)
    with source.module(serving.VLLM_CONFIG).set_current_vllm_config(config):
        return getattr(source.module(serving.NORM), CLASS)(**kwargs)


def step(model: serving.ModelClass, dtype: str) -> str:
    """The provenance of the device step for a class that builds its own norm."""
    return (
        f"real: {serving.NORM}.{CLASS}.forward_native into {dtype} (the CPU path; CUDA runs "
        f"fused_mm_input_norm_triton), built with the arguments {model.architecture}'s own call passes "
        f"({model.file}, read off the source: no build_mm_input_norm, the checkpoint's processor config unread)"
    )
