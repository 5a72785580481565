"""A fake vLLM module: the served geometry, the pixels' levels and the normalization (a model family's device path
normalizes with ``fused_normalize``; ``Processor`` stands where a companion's processor would be called)."""


def tokens(width, height, patch):
    return max(1, width // patch) * max(1, height // patch)


def to_level(value):
    return min(255, max(0, round(value)))


def normalize(level, mean, std):
    return (level / 255 - mean) / std


def fused_normalize(level, mean, std):
    return level * (1 / 255 / std) + (-mean / std)


class Processor:
    def __call__(self, level):
        return level
