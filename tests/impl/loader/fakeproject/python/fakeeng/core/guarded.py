"""Imports the same missing module inside try/except ImportError: no stand-in, its own fallback runs."""

try:
    import deferlab_fake_missing_dep as dep
except ImportError:
    dep = None

HAS_DEP = dep is not None
