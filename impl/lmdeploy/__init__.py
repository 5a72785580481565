"""LMDeploy, deferlab's third engine: its InternVL 2.5/3 image path run for real on a CPU (semantics §19).

Module map:

* `plugin`: its registration (the ``deferlab.engines`` entry point) and the InternVL path it declares.
* `served`: the `FamilyPath` the claims read (``LMDEPLOY``), over `internvl`.
* `sources`: ``ENGINE`` (the `impl.loader.engine.Engine` of LMDeploy, from its registration), ``load(spec)`` (a
  release fetched into the deferlab cache, a checkout, or ``installed``; one per process), the source errors.
* `shims`: the functional stand-in for transformers' ``CLIPImageProcessor`` where transformers is absent.
* `internvl`: ``InternVLPath``: LMDeploy's own ``ImageMediaIO`` load, ``InternVLVisionModel.build_preprocessor``
  and ``preprocess`` (tiles, grid, thumbnail, float32 pixels, tokens), and its ``dynamic_preprocess`` on
  size-only images for geometry sweeps.
* `geometry`: deferlab's NumPy restatement of LMDeploy's tile rule (§19.3), for exhaustive sweeps.
"""
