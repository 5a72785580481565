"""SGLang as a deferlab engine plugin: its registration, read by the registry through the ``deferlab.engines``
entry point (`reference.system.engines`). Plain data: this module imports only the description, so the registry
can load it before anything else of SGLang's driver."""

from __future__ import annotations

from deferlab.reference.system.engines import EngineFacts

ENGINE = EngineFacts(
    name="sglang",
    display="SGLang",
    article="an",
    label="SGLANG",
    first_release="0.5.17",  # the first release with a Kimi-K3 processor (semantics §12.2)
    example_release="0.5.23",
    claims=None,
    suite="claims",
    sources="deferlab.impl.sglang.sources",
    image_bytes="deferlab.impl.sglang.image_bytes",  # its loader of a client's image bytes (C20, semantics §20.8)
    load_check="deferlab.impl.sglang.sources:load",
    driver="deferlab.impl.sglang.driver:SGLangImpl",
    column_prefix="",
    floor="no Kimi-K3 image path",
    order=0,
    seam="deferlab.impl.sglang.driver:SGLangImpl",  # the seam implementation: C1-C12 run on SGLang's own code
    video="deferlab.impl.sglang.video",
    hooks="deferlab.impl.sglang.hooks",
    repro="deferlab.reports.repro.engine_sets:SGLANG",  # its reproducer templates (`reports.repro`)
    mutate_baseline=True,  # reports/mutate_baseline.json is a sample of its campaign
    anchor=True,  # a checkout carries SGLang's own unit tests (`reports.mutate.anchor`)
    warm_fork=True,  # a fork of a loaded server runs a mutant as a new process would (reports.mutate.fork)
)
