"""What the reproducers write for each engine, found through its plugin (`EngineFacts.repro`), so the reproducer
code (`reports.repro.templates`, `reports.repro.families`, `reports.repro.served`) never tests an engine's name.

Why a set per engine: a reproducer calls the engine's own functions, and which of them (SGLang's owner pipeline,
vLLM's request parser and the processor its provenance names, the tiling each serves InternVL with) is the
engine's; the texts stay in the text modules, and the sets (`reports.repro.engine_sets`) say which are whose.
An engine whose plugin names none (or an unknown name) gets `NONE`: no template fits its rows.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from deferlab.reference.system.engines import ENGINES


@dataclass(frozen=True)
class EngineRepro:
    """One engine's reproducers.

    ``templates``: claim -> template of its Kimi-K3 columns (None: it has none); ``family_fits``: claim -> the fits
    of its model-family columns, tried in order (`reports.repro.families`); ``kimi_family_claims``: the claims of
    its Kimi-K3 column written by those fits; ``family_served``: the served side a family file names;
    ``internvl_tiles``: (imports, served text) of its InternVL tiling; ``companions``: family -> the libraries its
    path computes with, loaded at the release's pins; ``serving`` / ``geometry``: row -> the imports and served
    text of C14 / C13 (None: the row does not say); ``geometry_args``: C13's file states ``navit_resize_config``'s
    arguments; ``media_proc_defaults``: keys its processor reads beside a ``media_proc_cfg``'s own;
    ``qwen_pixels``: row -> the imports, constants and served text of a Qwen column's C14 (None: the row does not
    say).
    """

    templates: Callable[[], dict[str, Any]] | None = None
    family_fits: Mapping[str, tuple[Callable[..., Any], ...]] = field(default_factory=dict)
    kimi_family_claims: tuple[str, ...] = ()
    family_served: str = ""
    internvl_tiles: tuple[str, str] = ("", "")
    companions: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    serving: Callable[[Mapping[str, Any] | None], dict[str, str] | None] = lambda row: None
    geometry: Callable[[Mapping[str, Any] | None], tuple[str, str] | None] = lambda row: None
    geometry_args: bool = False
    media_proc_defaults: Callable[[], dict[str, Any]] = dict
    qwen_pixels: Callable[[Mapping[str, Any] | None], tuple[str, str, str] | None] = lambda row: None


NONE = EngineRepro()


@cache
def repro_of(engine: str) -> EngineRepro:
    """The reproducers of ``engine`` as its plugin names them (``module:attribute``); `NONE` where it names none."""
    facts = ENGINES.get(str(engine))
    if facts is None or not facts.repro:
        return NONE
    module, _, attr = facts.repro.partition(":")
    found = getattr(importlib.import_module(module), attr)
    if not isinstance(found, EngineRepro):
        raise TypeError(f"engine plugin {facts.name!r}: repro {facts.repro!r} is a {type(found).__name__}, not an EngineRepro")  # fmt: skip
    return found
