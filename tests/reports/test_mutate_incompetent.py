"""A mutant whose operator cannot apply itself is incompetent, not a crash of the campaign (`reports.mutate.engine`):
cosmic-ray's ExceptionReplacer offers an ``except (A, B.C) as e`` tuple split over lines and then fails on it (seen
on vLLM 0.34.0's ``multimodal/media/image.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("cosmic_ray", reason="needs the mutate extra (cosmic-ray)")

from deferlab.reports.mutate.engine import Sources, Target, population  # noqa: E402

CODE = """import PIL.Image as Image


def load(data):
    try:
        return int(data)
    except (
        ValueError,
        Image.UnidentifiedImageError,
    ) as e:
        raise KeyError(data) from e
    except TypeError:
        return -1
"""


def test_an_operator_that_cannot_apply_gives_no_mutant_and_the_others_still_do(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text(CODE)
    target = Target("m.py", "load", 4, CODE.count("\n"))
    mutants = population(tmp_path, [target], ["core/ExceptionReplacer"])
    assert len(mutants) >= 2, "the operator offers mutants here"
    sources = Sources(tmp_path)
    made = [sources.mutated(m) for m in mutants]  # none raises
    assert None in made  # the dotted name in the tuple: the operator cannot apply itself
    assert any(code is not None and "except CosmicRayTestingException" in code for code in made)
