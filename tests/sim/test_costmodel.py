"""Cost profiles (sim.costmodel, sim.profile_schema): every constant carries its source; bad files are refused by name."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from deferlab import sim
from deferlab.properties.strategies.sim import cost_profile_file
from deferlab.reference.system.errors import ProfileError
from deferlab.sim.costmodel import load_cost_model, shipped_profiles
from deferlab.sim.profile_schema import CONSTANTS, HOST_CONSTANTS, UNITS

PROFILES = Path(sim.__file__).parent / "profiles"
GPU = load_cost_model("gb300-class")


def test_shipped_profiles_load_and_say_where_every_constant_comes_from() -> None:
    """Every constant: a known source; measured ones say how, where, and their spread over the repeats."""
    assert shipped_profiles()[0] == "gb300-class" and "calibrated-here" in shipped_profiles()
    for name in shipped_profiles():
        cm = load_cost_model(name)
        assert set(cm.provenance) == set(CONSTANTS)
        for key, prov in cm.provenance.items():
            assert prov["source"] in ("measured", "published", "assumption"), (name, key)
            assert prov["how"], (name, key)
            if prov["source"] == "measured":
                lo, hi = prov["spread"]
                assert prov["machine"] and prov["repeats"] >= 1 and lo <= hi, (name, key)


def test_gpu_class_takes_its_host_constants_from_calibration() -> None:
    """gb300-class: every host-side constant is the calibrated one (via calibrated-here); GPU figures are its own."""
    gpu, here = load_cost_model("gb300-class"), load_cost_model("calibrated-here")
    for key in HOST_CONSTANTS:
        assert gpu.provenance[key]["via"] == "calibrated-here" and gpu.provenance[key]["source"] == "measured"
        assert getattr(gpu, key) == getattr(here, key)
        assert here.provenance[key]["source"] == "measured" and "via" not in here.provenance[key]
    for key in ("h2d_bytes_per_s", "vit_s_per_patch", "prefill_gpu_s_per_token", "prefill_token_budget"):
        assert "via" not in gpu.provenance[key] and gpu.provenance[key]["source"] in ("published", "assumption")
    assert here.observations["microbenchmark_4x1536x1024"]["eager_s"] > 0


def test_a_constant_referring_back_to_its_own_file_is_refused(tmp_path: Path) -> None:
    """Resolution of ``from = <profile>`` stops at a cycle (the other bad files are in test_front_door's table)."""
    loop = cost_profile_file(tmp_path, "", drop="memcpy_bytes_per_s")
    loop.write_text(loop.read_text() + f'[constants.memcpy_bytes_per_s]\nfrom = "{loop}"\n')
    with pytest.raises(ProfileError, match=r"'memcpy_bytes_per_s' refers back to itself"):
        load_cost_model(loop)
    assert issubclass(ProfileError, ValueError)


@given(dim=st.sampled_from(sorted(UNITS)), data=st.data())
def test_every_known_unit_converts_to_the_canonical_one(
    tmp_path_factory: pytest.TempPathFactory, dim: str, data: st.DataObject
) -> None:
    """A value given in any accepted unit loads as value x that unit's factor."""
    name = next(k for k, (d, _) in CONSTANTS.items() if d == dim)
    unit = data.draw(st.sampled_from(sorted(UNITS[dim])))
    value = data.draw(st.floats(1.0, 1e6))
    body = f'[constants.{name}]\nvalue = {value!r}\nunit = "{unit}"\nsource = "assumption"\nhow = "test"\n'
    cm = load_cost_model(cost_profile_file(tmp_path_factory.mktemp("u"), body))
    assert getattr(cm, name) == pytest.approx(value * UNITS[dim][unit], rel=1e-12)


@given(nbytes=st.floats(0, 1e9), world=st.integers(1, 64))
def test_broadcast_cost_is_the_measured_one_and_grows_with_bytes(nbytes: float, world: int) -> None:
    """Zero within one rank; the measured line at worlds 2, 4, 8; past 8, the world-8 cost per peer; more bytes never
    cost less. (Not monotone in the world: on an oversubscribed host the measured latencies are noisy.)"""
    cm = GPU
    assert cm.bcast(nbytes, 1) == 0.0
    assert cm.bcast(nbytes * 2 + 1, world) >= cm.bcast(nbytes, world)
    for w in (2, 4, 8):
        lat, bw = getattr(cm, f"bcast_latency_s_w{w}"), getattr(cm, f"bcast_bytes_per_s_w{w}")
        assert cm.bcast(nbytes, w) == pytest.approx(lat + nbytes / bw)
    if world > 8:
        assert cm.bcast(nbytes, world) == pytest.approx(cm.bcast(nbytes, 8) * (world - 1) / 7)
