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
from deferlab.properties.front_door.api import Bad
from deferlab.reference.system.errors import InputTypeError, InputValueError


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
]
