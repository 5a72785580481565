"""The files of a fake engine package outside deferlab (`tests/project/test_engine_plugins.py`): what a new engine
writes, and nothing else, so the test shows the recipe of docs/layout.md ("An engine is a plugin") is complete.

The package ``fake_engine`` registers the engine ``fakeeng`` (`EngineFacts` in ``plugin.py``, its entry point in its
own ``*.dist-info``), loads a release with deferlab's loader (``sources.py``), gives its path for one family
(``served.py``: Gemma 3, judged on normalization only, C15) and answers deferlab's few questions (``hooks.py``). Its
"releases" are trees shipped inside the package (``releases/<version>/``, laid out as deferlab's cache holds a
fetched wheel: the import package and its `impl.loader.wheels.META`), since no wheel of it is on the package index: the engine's
``hooks.releases()`` lists them and ``sources.load`` resolves a release in that folder. Each release's own
normalization function (``fakeeng_rt/norm.py``) is the engine code the claim runs:

* 1.0.0 rescales as the checkpoint's processor does (``f32(f64(u) * rescale_factor)``, then ``(x - mean) / std`` in
  float32): C15 ``holds``;
* 1.1.0 folds both into one multiply-add in float32 (``f32(u) * f32(rescale_factor / std) - f32(mean / std)``),
  the one documented difference: 111 of Gemma 3's 256 levels differ in their last bits, C15 ``fails``.

No ``claims.toml`` row names the engine: its verdicts are recorded, not asserted (`properties.claimcheck`).
"""

from __future__ import annotations

import json
from pathlib import Path

from deferlab.impl.loader.wheels import META  # what a release folder of deferlab's cache holds beside the package

PLUGIN = """
from deferlab.reference.system.engines import EngineFacts, Served

ENGINE = EngineFacts(
    name="fakeeng", display="Fake Engine", article="a", label="FAKE", first_release="1.0.0",
    example_release="1.1.0", claims=("C15",), suite="claims", sources="fake_engine.sources",
    load_check="fake_engine.sources:load", driver="fake_engine.served:paths", column_prefix="fake-",
    distribution="fake-engine-dist", package="fakeeng_rt", order=50, served="fake_engine.served",
    hooks="fake_engine.hooks",
    serves=(("gemma3", Served("fakeeng", "1.0.0", "", "served", True, ("fakeeng_rt.norm",), "its own rescale")),),
)
"""

SOURCES = """
from pathlib import Path

from deferlab.impl.loader import sources as _loader
from deferlab.impl.loader.engine import registered

ENGINE = registered("fakeeng", __file__)
RELEASES = Path(__file__).parent / "releases"


def load(spec="1.1.0", **options):
    return _loader.load_named(ENGINE, spec, _check, _build, cache=RELEASES, **options)


def _check(spec, found):
    _loader.require_file(ENGINE, spec, found, "fakeeng_rt/norm.py", "normalization", "a fake engine release")


def _build(spec, found, importer):
    return _loader.build_source(_loader.Source, spec, found, importer, ("fakeeng_rt.norm",))
"""

SERVED = """
import numpy as np

from deferlab.reference.system.errors import InputValueError

COMPANIONS = {}


class NotCovered(InputValueError):
    pass


class NormPath:
    label, path, dtype, real_code, channels = "FAKE", "served", "float32", True, 3

    def __init__(self, source, family):
        self.source, self.family = source, family
        self.name = f"{source.name} ({family}, served)"

    def levels(self, cfg):
        norm = self.source.module("fakeeng_rt.norm")  # the loaded release's own code
        u = np.arange(256, dtype=np.uint8)
        return np.stack([norm.normalize(u, cfg.rescale_factor, m, s) for m, s in zip(cfg.image_mean, cfg.image_std)])

    def provenance(self):
        return {"normalization": f"fakeeng_rt.norm.normalize of {self.source.name}"}


def paths(source, family, settings=None, **_):
    if family != "gemma3":
        raise NotCovered(f"n/a: no Fake Engine path for {family!r}; accepted: gemma3")
    return [NormPath(source, family)]
"""

HOOKS = f"""
def default_version():
    return "1.1.0"


def probed_modules():
    return []


def releases():
    from fake_engine.sources import RELEASES

    return sorted(p.name for p in RELEASES.iterdir() if (p / "{META}").is_file())
"""

NORM = {
    "1.0.0": """
import numpy as np


def normalize(u, rescale_factor, mean, std):
    x = (u.astype(np.float64) * rescale_factor).astype(np.float32)
    return (x - np.float32(mean)) / np.float32(std)
""",
    "1.1.0": """
import numpy as np


def normalize(u, rescale_factor, mean, std):
    # rescale and normalize folded into one multiply-add in float32: the documented difference from the checkpoint
    return u.astype(np.float32) * np.float32(rescale_factor / std) - np.float32(mean / std)
""",
}


def install(site: Path) -> None:
    """The package ``fake_engine`` and its distribution's metadata with the entry point, into folder ``site``."""
    pkg = site / "fake_engine"
    pkg.mkdir(parents=True)
    for name, text in {"__init__": "", "plugin": PLUGIN, "sources": SOURCES, "served": SERVED, "hooks": HOOKS}.items():
        (pkg / f"{name}.py").write_text(text)
    for version, norm in NORM.items():
        tree = pkg / "releases" / version
        (tree / "fakeeng_rt").mkdir(parents=True)
        (tree / "fakeeng_rt" / "__init__.py").write_text(f'__version__ = "{version}"\n')
        (tree / "fakeeng_rt" / "norm.py").write_text(norm)
        (tree / META).write_text(json.dumps({"version": version, "wheel": "shipped in the fake_engine package"}))
    info = site / "fake_engine_dist-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fake-engine-dist\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[deferlab.engines]\nfakeeng = fake_engine.plugin:ENGINE\n")
