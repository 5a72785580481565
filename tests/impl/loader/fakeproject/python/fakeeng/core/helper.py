"""Pure Python the fake engine's own modules import: its file must be there (never a stand-in)."""


def triple(x):
    return 3 * x
