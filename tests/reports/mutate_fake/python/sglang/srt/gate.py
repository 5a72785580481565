"""A fake engine module: a gate, a patch count, a countdown, an import-time check, a scale only a property calls."""


def should_defer(raw, processed):
    return raw <= processed


def patches(width, height, patch):
    return ((width + patch - 1) // patch) * ((height + patch - 1) // patch)


def countdown(n):
    while n > 0:
        n = n - 1
    return n


def _self_check():
    if not 1 < 2:
        raise ImportError("the fake engine refuses to load")


def never_called(x):
    return x * 2


def scale(x, k):
    return x * k + 1


_self_check()
