"""The driver that runs real SGLang's own code behind the seam, in layers (imports point up this table).

============  ==========  =================================================================
module        layer       what it holds
============  ==========  =================================================================
shims         load        functional stand-ins (msgspec) SGLang's item types need
sources       load        `ENGINE` (SGLang as an `impl.loader` engine), the Kimi-K3 module
                          names, `Source`, ``load``, `SGLangSourceError`, `SGLangFetchError`
capabilities  inspection  which call sites / producers the loaded tree has (read off code)
topology      run         the parallel topology SGLang's code asks for
tokenizer     run         the stub tokenizer, the placeholder prompt, the media config
runtime       run         how SGLang's functions are called on a CPU (patches, stubs)
producer      run         the tokenizer side: gate call sites, producers
consumer      run         the scheduler side: delivery, owners, the model's loader
counterpool   IPC         the PR-era shared-memory counter pool's counts
counts        IPC         `IPCCounts`: producer / consumer counts from SGLang's code
ackcounts     IPC         `SGLangAckCounts`: counts + ack words for the simulator
features      inspection  ``detect(impl)``: what a version has, found by running it
provenance    inspection  ``of(impl)`` per function, ``per_method(impl)`` per seam method
driver        facade      `SGLangImpl`: the seam's `Impl` itself, `LABEL`, `DEFAULT_VERSION`
broken        facade      `BrokenSGLangGateTie`: the real gate with a one-token break
compare       inspection  SGLang against deferlab's model, function by function
matrix        inspection  one subprocess per version: features, stand-ins, provenance
families      facade      SGLang's processors of other model families (InternVL, Kimi-K2.5,
                          Qwen-VL) as `FamilyPath`s; their modules imported only on demand
============  ==========  =================================================================

``features`` and ``provenance`` are handed the driver (they never import it);
``compare`` and ``matrix`` build one. The generic machinery (wheel cache,
source resolution, importer, stand-ins, their records) is ``impl.loader``.
"""
