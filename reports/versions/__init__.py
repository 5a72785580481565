"""``deferlab versions``: the claims on each release of an engine, side by side, and which policy each matches."""
