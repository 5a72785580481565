"""C13's exhaustive sweep finds each engine path's geometry function through the engine's plugin hooks.

Why: `reports.report.sweeps.geometry.engine_function` names no engine's package (issue 29, item 4); each engine's
``hooks.kimi_geometry_function`` answers for its own paths (None for another's). These pin that the answers are
the ones the sweep had before: vLLM's remote-code releases refused in their one line, vLLM's own processor
module's ``navit_resize_image``, SGLang's real code's ``navit_resize_config`` of its Kimi-K2.5 module, deferlab's
model its own function, anything else swept interpreted. Fakes stand in for the loaded releases; the last test
loads SGLang's default release (a skip only when it cannot be fetched).
"""

from __future__ import annotations

import types

from deferlab.impl.sglang import hooks as sglang_hooks
from deferlab.impl.vllm import hooks as vllm_hooks
from deferlab.impl.vllm import sources as vllm_sources
from deferlab.reports.report.sweeps import geometry as geo


def navit_resize_image(w, h, p, m, limit, one_side, fixed):  # an engine's function, as a fake module holds it
    return w, h


def navit_resize_config(w, h, p, m, limit, one_side, fixed):
    return w, h


class _Source:
    """A loaded release's modules by name: ``module(name)`` as `impl.loader` answers it."""

    def __init__(self, modules: dict[str, object], processor_name: str = "") -> None:
        self.modules, self.processor_name = modules, processor_name

    def module(self, name: str) -> object:
        return self.modules[name]


def test_vllm_remote_code_release_is_refused_in_its_line() -> None:
    path = types.SimpleNamespace(serves_own_processor=False, source=None)
    assert geo.engine_function(path) == (
        "n/a: vLLM serves the checkpoint's own remote-code processor here (the oracle models it)"
    )


def test_vllm_path_gets_navit_resize_image_of_its_processor_module() -> None:
    processor = type("KimiProcessor", (), {"__module__": "fake.kimi_module"})
    source = _Source(
        {
            vllm_sources.PREPROCESS: types.SimpleNamespace(KimiProcessor=processor),
            "fake.kimi_module": types.SimpleNamespace(navit_resize_image=navit_resize_image),
        },
        processor_name="KimiProcessor",
    )
    found = geo.engine_function(types.SimpleNamespace(serves_own_processor=True, source=source))
    assert isinstance(found, geo.EngineFunction) and found.fn is navit_resize_image and not found.takes_config
    assert vllm_hooks.kimi_geometry_function(types.SimpleNamespace()) is None  # not vLLM's path


def test_sglang_real_code_gets_navit_resize_config_and_a_model_path_does_not() -> None:
    impl = types.SimpleNamespace(
        source=_Source({sglang_hooks.K25: types.SimpleNamespace(navit_resize_config=navit_resize_config)})
    )
    found = geo.engine_function(types.SimpleNamespace(impl=impl, real_code=True))
    assert isinstance(found, geo.EngineFunction) and found.fn is navit_resize_config and not found.takes_config
    assert sglang_hooks.kimi_geometry_function(types.SimpleNamespace(impl=impl, real_code=False)) is None


def test_model_path_and_unknown_path() -> None:
    def _resize_config(w, h, cfg):
        return w, h

    found = geo.engine_function(types.SimpleNamespace(_resize_config=_resize_config, real_code=False))
    assert isinstance(found, geo.EngineFunction) and found.fn is _resize_config and found.takes_config
    assert (
        geo.engine_function(object()) == "no engine function found: the path's geometry_function is swept interpreted"
    )


def test_sglang_release_path_names_its_kimi_function() -> None:
    from deferlab.properties.engines import default_spec, load_or_skip
    from deferlab.reports.report.served.paths import KIMI_PATHS

    paths = load_or_skip(lambda spec: KIMI_PATHS["sglang"](spec, None), default_spec("sglang"))
    assert [p.path for p in paths] == ["eager", "deferred"]
    names = {geo.engine_function(p).name for p in paths}
    assert names == {"sglang.srt.multimodal.processors.kimi_k25.navit_resize_config"}
