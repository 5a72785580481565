"""deferlab's independent oracle: pure NumPy (+ Pillow only to decode and read raw bands).

It must stay free of any torch dependency and never call ``Image.convert`` for a conversion it
is meant to check. The shared types (`reference.system.config`, `reference.system.profiles`,
`reference.system.contract`) are the only part ``impl`` may import.
"""

from deferlab.reference.system.config import BackgroundConfig, PreprocessConfig, ResizeConfig
from deferlab.reference.system.profiles import DEFAULT_PROFILE, profile, profile_names

__all__ = ["BackgroundConfig", "PreprocessConfig", "ResizeConfig", "DEFAULT_PROFILE", "profile", "profile_names"]
