"""LMDeploy's answers to the few questions deferlab's engine-free code asks of an engine (`EngineFacts.hooks`):
the release a check loads by default and the modules a mutation campaign probes. Its family paths say themselves
why C13 compiles nothing (``geometry_note``, `impl.lmdeploy.served`).
"""

from __future__ import annotations


def default_version() -> str:
    """The release a check loads when ``DEFERLAB_LMDEPLOY`` does not name one (`properties.engines.default_spec`)."""
    from deferlab.impl.lmdeploy.sources import DEFAULT_VERSION

    return DEFAULT_VERSION


def probed_modules() -> list[str]:
    """None yet: a campaign on LMDeploy probes only its family paths' modules (`reports.mutate.select`)."""
    return []
