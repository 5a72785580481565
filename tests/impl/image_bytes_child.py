"""C20's sides in a process of their own (one engine, one transformers per process): ``python -m
tests.impl.image_bytes_child SCENARIO [ENGINE VERSION]``, printing one ``JSON:`` line.

Scenarios:

* ``trained``: transformers' ``load_image`` run for real (the installed 5.24.0) against deferlab's restatement of it
  (`properties.bytes_trained.restated`), every encoded class at two sizes, as a data URI and as a file.
* ``card``: the model card's ``fetch_image`` (`properties.bytes_trained.card`, torchvision as a companion) against
  the trained side, every class at 84x56 (a size its resize keeps), both kinds: per case the first difference.
  ``{"refused": line}`` when CARD cannot run here.
* ``engine ENGINE VERSION``: the engine's own loader (``impl.<engine>.image_bytes``) of that release against the
  trained side, every class at 17x11, both kinds: per class and kind the first difference (None: equal), the
  decoded size, a fully transparent pixel's value, and Pillow's truncated-images flag before and after a load.
  ``{"unfetched": line}`` when the release cannot be fetched (the test skips on it).
"""

from __future__ import annotations

import importlib
import json
import sys
import time
from typing import Any

from PIL import ImageFile

from deferlab.impl.image_bytes import KINDS
from deferlab.properties import bytes_trained
from deferlab.properties.strategies import encoded
from deferlab.reference.oracle import bytes_served
from deferlab.reference.system.video import Refused


def trained() -> dict[str, Any]:
    real, restated = bytes_trained.real(), bytes_trained.restated("the child's check")
    found = {}
    for cls in encoded.ENCODED_CLASSES:
        for w, h in ((17, 11), (40, 30)):
            data = encoded.make_bytes(cls, w, h, 7)
            for kind in KINDS:
                found[f"{cls} {w}x{h}; {kind}"] = bytes_trained.decode_problem(real, restated, data, kind)
    return {"system": real.system, "problems": found}


def card() -> dict[str, Any]:
    from deferlab.reference.system.video import Unsupported

    try:
        side = bytes_trained.card()
    except Unsupported as e:
        return {"refused": str(e)}
    want = bytes_trained.real()
    found = {}
    for cls in encoded.ENCODED_CLASSES:
        data = encoded.make_bytes(cls, 84, 56, 0)
        for kind in KINDS:
            found[f"{cls}; {kind}"] = bytes_trained.decode_problem(want, side, data, kind)
    try:  # a size its resize changes: no answer, not a refusal
        side.load(encoded.make_bytes("RGB PNG", 17, 11, 0), "file")
        other = "answered"
    except Unsupported as e:
        other = str(e)
    return {"system": side.system, "trained": want.system, "problems": found, "unkept size": other}


def engine(name: str, version: str) -> dict[str, Any]:
    from deferlab.impl.loader.engine import FetchError
    from deferlab.reference.system.engines import engine as facts_of

    facts = facts_of(name)
    started = time.perf_counter()
    try:
        source = importlib.import_module(facts.sources).load(version)
    except FetchError as e:
        return {"unfetched": str(e)}
    loaded = time.perf_counter()
    (loader,) = importlib.import_module(facts.image_bytes).image_loaders(source)
    want = bytes_trained.trained()
    out: dict[str, Any] = {"label": loader.label, "system": loader.system, "trained": want.system, "cases": {}}
    flag_before = ImageFile.LOAD_TRUNCATED_IMAGES
    for cls in encoded.ENCODED_CLASSES:
        data = encoded.make_bytes(cls, 17, 11, 0)
        for kind in KINDS:
            image, refused = bytes_trained.decoded(loader, data, kind)
            out["cases"][f"{cls}; {kind}"] = {
                "problem": bytes_trained.decode_problem(want, loader, data, kind),
                "size": list(image.size) if image is not None else None,
                "corner": list(image.getpixel((0, 0))) if image is not None else None,  # RGBA/LA: alpha 0 there
                "refused": None if refused is None else str(refused),
            }
    rule = bytes_served.rule_for(loader.system)
    if rule is not None:  # the engine's stated decode (semantics §20.8): per class and kind, and per option set
        out["rule"] = {}
        for cls in encoded.ENCODED_CLASSES:
            data = encoded.make_bytes(cls, 17, 11, 0)
            for kind in KINDS:
                image, refused = bytes_trained.decoded(loader, data, kind)
                out["rule"][f"{cls}; {kind}"] = bytes_served.differs(rule(data), image, refused)
                out["cases"][f"{cls}; {kind}"]["ruled"] = bytes_trained.decode_problem(want, loader, data, kind, rule)
        rgba = encoded.make_bytes(*bytes_served.REQUEST_CASE)
        out["requests"] = {}
        for request in bytes_served.REQUESTS:
            for kind in KINDS:
                name = " ".join(f"{k}={v}" for k, v in request.items())
                image, key = loader.keyed(rgba, kind, request)
                plain, plain_key = loader.keyed(rgba, kind)
                out["requests"][f"{name}; {kind}"] = {
                    "problem": bytes_trained.option_problem(loader, rgba, kind, request, rule),
                    "corner": list(image.getpixel((0, 0))),
                    "keys differ": key != plain_key,
                    "images differ": bytes_trained.difference(plain, image, "x") is not None,
                }
        data = encoded.make_bytes(*bytes_served.OPTION_CASE)
        out["options"] = {}
        for options in bytes_served.OPTIONS:
            for kind in KINDS:
                name = " ".join(f"{k}={v}" for k, v in options.items())
                try:
                    got = loader.load(data, kind, options)
                    answer = [got.mode, *got.size]
                except Refused as e:
                    answer = str(e)
                out["options"][f"{name}; {kind}"] = {
                    "problem": bytes_trained.option_problem(loader, data, kind, options, rule),
                    "answer": answer,
                }
    out["flag"] = [flag_before, ImageFile.LOAD_TRUNCATED_IMAGES]
    out["seconds"] = {"load": round(loaded - started, 2), "classes": round(time.perf_counter() - loaded, 3)}
    return out


if __name__ == "__main__":
    scenario, *rest = sys.argv[1:]
    result = {"trained": trained, "card": card}[scenario]() if scenario != "engine" else engine(*rest)
    print("JSON:" + json.dumps(result))
