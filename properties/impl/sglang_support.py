"""Moved to `deferlab.properties.impl.sglang.support`; this re-export stays until its last importers move."""

from deferlab.properties.impl.sglang.support import default_spec, fake_sglang_tree, load_or_skip, run_child  # noqa: F401
