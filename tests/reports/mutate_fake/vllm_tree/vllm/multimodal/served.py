"""A fake vLLM module: the served geometry, the pixels' levels and the normalization."""


def tokens(width, height, patch):
    return max(1, width // patch) * max(1, height // patch)


def to_level(value):
    return min(255, max(0, round(value)))


def normalize(level, mean, std):
    return (level / 255 - mean) / std
