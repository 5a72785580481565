"""Defines one name, then its body raises: the name stays real, the rest are stand-ins."""

BEFORE = "real"

raise RuntimeError("this body needs a GPU")
