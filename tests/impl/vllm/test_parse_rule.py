"""vLLM's own input parser against the stated parse (semantics §20.8), on the in-process release: every image class
C14 draws, at its pinned size and a drawn one, is handed on as the rule's image bitwise; a family path's `parsed`
is that parser; and C14's reading adds its clause exactly where the parser departs from the rule."""

from __future__ import annotations

import os

import numpy as np
import pytest
from PIL import Image

from deferlab.impl.vllm import serving
from deferlab.impl.vllm.served import paths
from deferlab.properties import families as fam
from deferlab.properties.strategies.served import make_image
from deferlab.reference.oracle import parsed_served
from deferlab.reference.system.served import IMAGE_CLASSES

pytestmark = [
    pytest.mark.skipif(os.environ.get("DEFERLAB_VLLM", "0.34.0") != "0.34.0", reason="0.34.0's facts"),
    pytest.mark.extra("vllm"),
    pytest.mark.extra("transformers"),
]


@pytest.mark.parametrize("cls", IMAGE_CLASSES)
def test_the_releases_parser_hands_on_the_rules_image(vllm_source, cls):
    rule = parsed_served.rule_for(vllm_source.name)
    assert rule is not None
    for w, h, seed in ((12, 10, 0), (7, 3, 5)):
        image = make_image(cls, w, h, seed)
        got = serving.parse(vllm_source, [image])[0]
        assert parsed_served.differs(got, rule(make_image(cls, w, h, seed))) is None, cls


def test_a_family_paths_parsed_is_the_releases_parser_and_a_departure_gets_its_own_clause(vllm_source):
    path = paths(vllm_source, "internvl")[0]
    image = make_image("RGBA partly transparent", 12, 10, 0)
    assert np.array_equal(np.asarray(path.parsed([image])[0]), np.asarray(serving.parse(vllm_source, [image])[0]))
    assert fam.parse_reading(path, image) == ""

    class Darker:  # the same path, its parser compositing onto 254 (the campaign's surviving default mutants)
        system, name = path.system, path.name

        @staticmethod
        def parsed(images):
            out = []
            for im in images:
                rgba = im.convert("RGBA")
                canvas = Image.new("RGB", rgba.size, (254, 254, 254))
                canvas.paste(rgba, mask=rgba.getchannel("A"))
                out.append(canvas)
            return out

    clause = fam.parse_reading(Darker(), image)
    assert clause.startswith("; its parser hands on ") and clause.endswith("not what semantics §20.8 states")
