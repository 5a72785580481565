"""Imports the engine's own helper inside ``except Exception``: a missing helper.py must still fail the load."""

try:
    from fakeeng.core import helper
except Exception:
    helper = None
