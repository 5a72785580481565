"""vLLM as a deferlab engine plugin: its registration, read by the registry through the ``deferlab.engines``
entry point (`reference.system.engines`). Plain data: this module imports only the description."""

from __future__ import annotations

from deferlab.reference.system.engines import EngineFacts

ENGINE = EngineFacts(
    name="vllm",
    display="vLLM",
    article="a",
    label="VLLM",
    first_release="0.27.0",  # the first release with a Kimi-K3 image path (semantics §16.1)
    example_release="0.33.0",
    # served vs trained, and device-finished vs host-finished; C1-C12 are about SGLang's PR (semantics §16.2, §18)
    claims=("C4", "C13", "C14", "C15", "C16", "C17", "C18", "C19", "C20"),  # C16-C20: requests as sent (§20)
    suite="claims",
    sources="deferlab.impl.vllm.sources",
    image_bytes="deferlab.impl.vllm.image_bytes",  # its loader of a client's image bytes (C20, semantics §20.8)
    load_check="deferlab.impl.vllm.driver:VLLMPath",  # the driver built on the tree: what serving needs
    driver="deferlab.impl.vllm.driver:VLLMPath",
    column_prefix="vllm-",
    floor="no Kimi-K3 image path",
    order=1,
    served="deferlab.impl.vllm.served",  # its paths per family (no seam: only what it serves is judged)
    video="deferlab.impl.vllm.video",
    hooks="deferlab.impl.vllm.hooks",
    repro="deferlab.reports.repro.engine_sets:VLLM",  # its reproducer templates (`reports.repro`)
)
