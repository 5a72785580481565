"""The front-door table, served-vs-trained half: the checkpoint oracle, the fill stage and the vLLM source.

Rows are `api.Bad`: a bad input to the checkpoint oracle (what the checkpoint refuses is refused with an error
of deferlab's family, never a wrong answer), a bad fill stage, and a vLLM source that cannot be used (refused
before anything is imported).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from deferlab.impl.vllm.sources import VLLMSourceError
from deferlab.reference.system.errors import ConfigError, InputTypeError, InputValueError
from tests.front_door.api import Bad


def _k3() -> Any:
    from deferlab.reference.system.profiles import profile

    return profile("kimi-k3")


def _ckpt(images: Any, cfg: Any = None) -> Any:
    from deferlab.reference.oracle import checkpoint

    return checkpoint.preprocess(images, _k3() if cfg is None else cfg)


def _tokens(w: Any, h: Any) -> Any:
    from deferlab.reference.oracle import checkpoint

    return checkpoint.num_tokens(w, h, _k3())


def _vllm(spec: Any) -> Any:
    from deferlab.impl.vllm.sources import load

    return load(spec)


def _not_a_vllm_tree(tmp: Path) -> str:
    (tmp / "vllm" / "multimodal").mkdir(parents=True)
    (tmp / "vllm" / "__init__.py").write_text("")
    return str(tmp)


SERVED_ROWS = [
    Bad("checkpoint float array", lambda t: _ckpt([np.zeros((4, 4, 3), np.float32)]), InputValueError, r"uint8"),
    Bad(
        "checkpoint 2-channel array",
        lambda t: _ckpt([np.zeros((4, 4, 2), np.uint8)]),
        InputValueError,
        r"images\[0\] has shape \(4, 4, 2\); accepted: .*C in \{1, 3, 4\}",
    ),
    Bad("checkpoint not an image", lambda t: _ckpt(["cat.png"]), InputTypeError, r"images\[0\]"),
    Bad(
        "checkpoint config dict",
        lambda t: _ckpt([Image.new("RGB", (2, 2))], {"patch_size": 14}),
        InputTypeError,
        r"PreprocessConfig",
    ),
    Bad(
        "checkpoint La refused",
        lambda t: _ckpt([Image.new("La", (2, 2))]),
        InputValueError,
        r"checkpoint's processor refuses it",
    ),
    Bad("checkpoint tokens width 0", lambda t: _tokens(0, 5), InputValueError, r"width must be an int >= 1"),
    Bad(
        "config fill stage",
        lambda t: _k3().with_(fill_stage="during_resize"),
        InputValueError,
        r"fill_stage .*must be one of 'after_resize', 'before_resize'",
    ),
    Bad("vllm not a version", lambda t: _vllm("newest"), VLLMSourceError, r"'newest': neither 'installed'"),
    Bad(
        "vllm not a checkout",
        lambda t: _vllm(_not_a_vllm_tree(t)),
        VLLMSourceError,
        r"has no Kimi-K3 image path .*accepted: vLLM 0\.27\.0 and later",
    ),
    Bad("vllm no such path", lambda t: _vllm(str(t / "nowhere")), VLLMSourceError, r"no such path; accepted"),
    Bad(
        "checkpoint dir missing", lambda t: _snapshot(t / "m"), ConfigError, r"'.*m' does not exist; accepted: a model"
    ),
    Bad("checkpoint dir is a file", lambda t: _snapshot(_file(t)), ConfigError, r"is not a folder; accepted: a model"),
    Bad("checkpoint dir empty", lambda t: _snapshot(t), ConfigError, r"holds no preprocessor_config\.json; accepted"),
    Bad("checkpoint dir bad json", lambda t: _snapshot(_dir(t, "[1,")), ConfigError, r"is not valid JSON .*; accepted"),
    Bad("checkpoint dir bad value", lambda t: _snapshot(_dir(t, '{"patch_size": 0}')), InputValueError, r"patch_size"),
]


def _snapshot(directory: Path) -> Any:
    from deferlab.reports.report.served.checkpoint import read_checkpoint

    return read_checkpoint(directory)


def _file(tmp: Path) -> Path:
    (tmp / "f").write_text("")
    return tmp / "f"


def _dir(tmp: Path, text: str) -> Path:
    (tmp / "preprocessor_config.json").write_text(text)
    return tmp
