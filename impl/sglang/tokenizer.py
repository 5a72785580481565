"""What SGLang's Kimi-K3 processor is handed on a CPU in place of a checkpoint's tokenizer: the stub its own
CPU tests use, a prompt with one placeholder per image, and the checkpoint's ``media_proc_cfg``.

A module of its own because the prompt's image tokens are what the producer counts: the same stub and
placeholder id serve every call site (`runtime.make_processor`, `producer`).
"""

from __future__ import annotations

import types
from typing import Any

import torch

from deferlab.reference.system.config import PreprocessConfig

IMAGE_TOKEN = "<|media_pad|>"
IMAGE_TOKEN_ID = 99  # as in SGLang's producer test (semantics §5.3); the stub tokenizer never emits it for text
_SPECIAL = {"<|media_begin|>": 11, "<|media_content|>": 12, "<|media_end|>": 13, IMAGE_TOKEN: IMAGE_TOKEN_ID}


class StubTokenizer:
    """The tokenizer stand-in SGLang's CPU tests use: K3 control tokens get fixed ids, other text one id per char.

    ``special`` (token -> id, every id under 1000) is what a subclass changes for another family's tokens."""

    special: dict[str, int] = _SPECIAL

    def encode(self, text: str, allowed_special: Any = None, **_: Any) -> list[int]:
        out: list[int] = []
        i = 0
        while i < len(text):
            for tok, tid in self.special.items():
                if text.startswith(tok, i):
                    out.append(tid)
                    i += len(tok)
                    break
            else:
                out.append(1000 + ord(text[i]))
                i += 1
        return out

    def __call__(self, text: Any, **_: Any) -> Any:
        texts = text if isinstance(text, list) else [text]
        return types.SimpleNamespace(input_ids=torch.tensor([self.encode(t) for t in texts]))


def prompt_ids(n_images: int) -> list[int]:
    """A token prompt with one placeholder per image: ``[1, 99, 2, 99, 2, ..., 3]``."""
    ids = [1]
    for i in range(n_images):
        ids += [IMAGE_TOKEN_ID] + ([2] if i + 1 < n_images else [])
    return ids + [3]


def media_proc_cfg(config: PreprocessConfig) -> dict[str, Any]:
    """The checkpoint-style ``media_proc_cfg`` SGLang reads (deferlab's own cap ``max_pixels`` left out)."""
    cfg = config.to_media_proc_cfg()
    cfg.pop("max_pixels", None)
    return cfg
