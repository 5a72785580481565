"""vLLM's image paths run for real on a CPU (a second engine under test, served vs trained), per model family.

==========  ==========================================================================
module      what it holds
==========  ==========================================================================
shims       functional stand-ins for what the Kimi-K3 path needs of transformers at
            run time (when the release's transformers is not loaded)
sources     vLLM as an `impl.loader` engine; `load(spec, companions=)`: the parser and
            the Kimi-K3 path imported for real, the served processor class read off
            the code, the pinned transformers/torchvision where a family needs them
serving     the serving settings (`Settings`) and what the release makes of them:
            ``mm_device_do_normalize``, the merged processor kwargs, the input norm
driver      `VLLMPath`: Kimi-K3 (pixels, grids, prompt tokens, geometry, levels)
family      `FamilyBase`, `NormPath` (GLM-4.1V, Mistral 3, Gemma 3/4), `NotCovered`
qwen        `QwenPath`: Qwen2.5-VL, Qwen3-VL
internvl    `InternVLPath`: InternVL 2.5/3
served      `paths(spec, family, settings)`: the paths a family is served with
==========  ==========================================================================
"""
