"""``--checkpoint DIR``: a downloaded model snapshot's own ``preprocessor_config.json`` as the run's config.

Why a folder, not a file: that is what a user has after downloading a
checkpoint, and vLLM builds its processor from the very same file's
``media_proc_cfg`` (handed to it as read, unknown keys included), while
deferlab's checks read the validated `PreprocessConfig` (fill stage
``transparent_bg_fill_stage`` included). Every refusal is one line naming
the folder, what is wrong and what is accepted, before any step runs.

Why in the description: the served checks (``properties.served``) read the
snapshot in the runner's children, and the checks never import the CLI; the
CLI's ``reports.report.served.checkpoint`` re-exports these.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from deferlab.reference.system.config import PreprocessConfig
from deferlab.reference.system.errors import ConfigError

FILE = "preprocessor_config.json"
ACCEPTED = f"accepted: a model snapshot folder holding {FILE} (flat, or with a 'media_proc_cfg' object)"


def _json(d: Path) -> dict[str, Any]:
    """The snapshot's config as JSON, or `ConfigError` in one line (no folder, no file, not JSON)."""
    if not d.is_dir():
        what = "does not exist" if not d.exists() else "is not a folder"
        raise ConfigError(f"checkpoint {str(d)!r} {what}; {ACCEPTED}")
    f = d / FILE
    if not f.is_file():
        raise ConfigError(f"checkpoint {str(d)!r} holds no {FILE}; {ACCEPTED}")
    try:
        data = json.loads(f.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ConfigError(f"{str(f)!r} is not valid JSON ({type(e).__name__}: {e}); {ACCEPTED}") from None
    return data if isinstance(data, dict) else {}


def read_checkpoint(directory: str | Path) -> tuple[PreprocessConfig, dict[str, Any]]:
    """(the validated config, the raw ``media_proc_cfg`` dict) of the snapshot in ``directory``."""
    d = Path(directory)
    f, data = d / FILE, _json(d)
    config = PreprocessConfig.from_json(f)  # its own one-line errors: missing or misspelled keys, bad values
    raw = data.get("media_proc_cfg") if isinstance(data.get("media_proc_cfg"), dict) else data
    return config.with_(name=f"checkpoint {d.name}"), dict(raw)


def checkpoint_family(directory: str | Path, asked: str | None) -> str:
    """The model family ``--checkpoint DIR`` names (its processor class, `reference.system.families.of_config`),
    checked against ``--model`` when given: the family, or `ConfigError` in one line (no such folder or file,
    a class no family has, or a family other than the one asked)."""
    from deferlab.reference.system.families import of_config

    family = of_config(_json(Path(directory)), str(Path(directory) / FILE))
    if asked is not None and asked not in (family.name, "all") and family.name not in asked.split(","):
        raise ConfigError(
            f"checkpoint {str(directory)!r} names {family.display}'s processor, not --model {asked}'s; accepted: "
            f"--model {family.name}, or no --model (the checkpoint decides)"
        )
    return family.name
