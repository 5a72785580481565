"""LMDeploy, deferlab's third engine: its InternVL 2.5/3 image path run for real on a CPU (semantics §19).

Module map:

* `sources`: ``ENGINE`` (the `impl.loader.engine.Engine` of LMDeploy, described directly), ``load(spec)`` (a
  release fetched into the deferlab cache, a checkout, or ``installed``; one per process), the source errors.
* `shims`: the functional stand-in for transformers' ``CLIPImageProcessor`` where transformers is absent.
* `internvl`: ``InternVLPath``: LMDeploy's own ``ImageMediaIO`` load, ``InternVLVisionModel.build_preprocessor``
  and ``preprocess`` (tiles, grid, thumbnail, float32 pixels, tokens), and its ``dynamic_preprocess`` on
  size-only images for geometry sweeps.
* `geometry`: deferlab's NumPy restatement of LMDeploy's tile rule (§19.3), for exhaustive sweeps.

Not wired into the CLI or ``reference.system.engines`` (another change owns those).
"""
