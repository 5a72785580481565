"""LMDeploy as a deferlab engine plugin: its registration and the family paths it declares itself, read by the
registry through the ``deferlab.engines`` entry point (`reference.system.engines`). Plain data: this module imports
only the description.

LMDeploy has no seam implementation (the deferral claims are SGLang's PR) and no Kimi-K3 path deferlab can check
(its Kimi-K2.5 runs the snapshot's own remote code, semantics §19.1): it answers the served-vs-trained claims of
the families whose preprocessing is its own code, InternVL 2.5/3 in every release read (§19.1-§19.4).
"""

from __future__ import annotations

from deferlab.reference.system.engines import EngineFacts, Served


def _every_release(code: tuple[str, ...], note: str) -> Served:
    """A family's path in every release semantics §19 read (0.14.0 on): named ``served``, LMDeploy's default
    serving setting, running the modules ``code``."""
    return Served("lmdeploy", "0.14.0", "", "served", True, code, note)


ENGINE = EngineFacts(
    name="lmdeploy",
    display="LMDeploy",
    article="an",
    label="LMDEPLOY",
    first_release="0.14.0",  # the oldest release semantics §19 read; InternVL's path is in every one read
    example_release="0.18.0",
    # C4 n/a: no release normalizes on the device (§19.4); the requests as sent, video and bytes (§20.7, §20.8)
    claims=("C13", "C14", "C15", "C16", "C17", "C18", "C19", "C20"),
    suite="claims",
    sources="deferlab.impl.lmdeploy.sources",
    image_bytes="deferlab.impl.lmdeploy.image_bytes",  # its loader of a client's image bytes (C20, semantics §20.8)
    load_check="deferlab.impl.lmdeploy.sources:load",
    driver="deferlab.impl.lmdeploy.served:paths",
    column_prefix="lmdeploy-",
    floor="no release semantics §19 read",
    order=2,
    served="deferlab.impl.lmdeploy.served",
    video="deferlab.impl.lmdeploy.video",
    hooks="deferlab.impl.lmdeploy.hooks",
    repro="deferlab.reports.repro.engine_sets:LMDEPLOY",  # its reproducers' companions (`reports.repro`)
    serves=(
        (
            "internvl",
            _every_release(
                ("lmdeploy.vl.media.image", "lmdeploy.vl.model.internvl"),
                "LMDeploy's own: the request bytes through ImageMediaIO (convert RGB), the card's tiling with "
                "max_num from the config (12), torchvision's Resize/ToTensor/Normalize on the host (semantics §19.2)",
            ),
        ),
        (
            "qwen3-vl",
            _every_release(
                ("lmdeploy.vl.media.video_loader", "lmdeploy.vl.model.qwen3"),
                "video (and a client's bytes) only: LMDeploy's VideoMediaIO samples the frames, the pinned "
                "transformers' Qwen3VLVideoProcessor does the rest (semantics §20.7); its image path is "
                "transformers' processor, not checked here (§19.1)",
            ),
        ),
    ),
)
