"""claims.toml's ``[claim.engines]``: real-engine expectations per range of releases, parsed strictly.

Why strict: a row names what a real release must give, and the claim test
asserts it; a typo in an engine name or a version must fail loudly, and two
rows must never both claim a release.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from deferlab.properties import claimcheck, seam
from deferlab.reference.system import claims

HEAD = '[[claim]]\nid="X"\nstatement="s"\nsource="s"\nproperty="p"\n[claim.expected]\nPR_33921="holds"\n'


def _load(tmp_path: Path, body: str) -> dict[str, claims.Claim]:
    path = tmp_path / "claims.toml"
    path.write_text(HEAD + body)
    return claims.load_claims(path)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ('[claim.engines]\n"tgi 1.0.0" = "holds"\n', "ENGINE one of"),
        ('[claim.engines]\n"vllm 0.33" = "holds"\n"vllm0.32.0" = "holds"\n', "engine key 'vllm0.32.0'"),
        ('[claim.engines]\n"vllm 0.33.x" = "holds"\n', "dotted-integer versions"),
        ('[claim.engines]\n"vllm 0.33.0-0.32.0" = "holds"\n', "the range is empty"),
        ('[claim.engines]\n"vllm 0.27.0-0.31.0" = "holds"\n"vllm 0.31.0-0.33.0" = "holds"\n', "overlaps"),
        ('[claim.engines]\n"sglang 0.5.23" = "maybe"\n', "accepted"),
        ('[claim.engines]\n"sglang 0.5.23" = "fails"\n', "names no \\[claim.failure\\]"),
        ('[claim.failure]\n"vllm 0.33.0" = "x"\n', "no such policy or engine key"),
        ('[claim.engines]\n"qwen9 vllm 0.33.0" = "holds"\n', "FAMILY one of"),
        (
            '[claim.engines]\n"qwen3-vl vllm:host 0.34.0" = "holds"\n"qwen3-vl vllm:host 0.33.0-0.34.0" = "holds"\n',
            "overlaps",
        ),
    ],
)
def test_a_bad_engine_row_is_refused(tmp_path: Path, body: str, message: str) -> None:
    """Unknown engines, malformed or empty ranges, overlaps, bad verdicts, unexplained fails: all refused."""
    with pytest.raises(ValueError, match=message):
        _load(tmp_path, body)


def test_versions_match_inclusive_ranges_and_only_releases(tmp_path: Path) -> None:
    """Both ends of a range match; outside it, another engine, or a non-release version: no expectation."""
    table = _load(tmp_path, '[claim.engines]\n"vllm 0.27.0-0.31.0" = "n/a"\n"vllm 0.33.0" = "holds"\n')
    ask = lambda version, engine="vllm": claims.expected_for_engine("X", engine, version, table)  # noqa: E731
    assert ask("0.27.0") == ask("0.29.0") == ask("0.31.0") == "n/a"
    assert ask("0.33.0") == "holds"
    assert ask("0.26.0") is ask("0.32.0") is ask("0.34.0") is ask("0.31.0.post1") is ask("0.33.0rc1") is None
    assert ask("0.5.23", engine="sglang") is None
    with pytest.raises(KeyError, match="known: sglang, vllm"):
        ask("0.33.0", engine="tgi")


def test_a_row_names_its_family_and_served_path_or_means_the_defaults(tmp_path: Path) -> None:
    """Rows of another family or another served path are their own, and never overlap the default's."""
    table = _load(
        tmp_path,
        '[claim.engines]\n"vllm 0.32.0-0.34.0" = "holds"\n"vllm:host-normalized 0.32.0-0.34.0" = "n/a"\n'
        '"qwen3-vl vllm 0.34.0" = "holds-with-caveat"\n"qwen3-vl vllm:host-normalized 0.34.0" = "n/a"\n',
    )

    def ask(family: str = "kimi-k3", path: str | None = None) -> str | None:
        return claims.expected_for_engine("X", "vllm", "0.34.0", table, family=family, path=path)

    assert (ask(), ask(path="host-normalized")) == ("holds", "n/a")
    assert (ask("qwen3-vl"), ask("qwen3-vl", "host-normalized"), ask("internvl")) == ("holds-with-caveat", "n/a", None)
    assert claims.parse_engine_key("qwen2.5-vl sglang 0.5.23") == ("sglang", "0.5.23", "0.5.23", "qwen2.5-vl", None)


def test_the_shipped_rows_say_what_semantics_16_4_derives() -> None:
    """claims.toml's rows for C13-C15 (semantics §16.4): every range, and nothing for other releases."""
    want = {
        ("sglang", "0.5.17"): ("holds", "fails", "fails"),
        ("sglang", "0.5.23"): ("holds", "fails", "fails"),
        ("vllm", "0.27.0"): ("n/a", "fails", "n/a"),
        ("vllm", "0.31.0"): ("n/a", "fails", "n/a"),
        ("vllm", "0.32.0"): ("holds", "fails", "fails"),
        ("vllm", "0.33.0"): ("holds", "fails", "fails"),
        ("vllm", "0.26.0"): (None, None, None),
        ("sglang", "0.5.16"): (None, None, None),
    }
    for (engine, version), verdicts in want.items():
        got = tuple(claims.expected_for_engine(c, engine, version) for c in ("C13", "C14", "C15"))
        assert got == verdicts, (engine, version, got)
    assert all(claims.expected_for_engine(f"C{i}", "sglang", "0.5.23") is None for i in range(1, 13))


def _as_release(monkeypatch: pytest.MonkeyPatch, engine: str, version: str, git_rev: str | None = None) -> None:
    """Pretend the session runs real ``engine`` ``version`` (what the plugin's fixtures set)."""
    source = SimpleNamespace(engine=SimpleNamespace(name=engine), version=version, git_rev=git_rev, root="/nowhere")
    monkeypatch.setattr(seam, "ACTIVE", seam.Recording(SimpleNamespace(real_code=True, source=source)))


def test_a_real_release_is_held_to_its_row(monkeypatch: pytest.MonkeyPatch) -> None:
    """assert_expected checks a covered release against its row (the default path's, or the path the verdict
    label names); an uncovered one or a checkout is a finding."""
    _as_release(monkeypatch, "vllm", "0.33.0")
    claimcheck.assert_expected("C13", "VLLM", "holds")
    with pytest.raises(AssertionError, match="'vllm 0.32.0-0.34.0' expects 'holds'"):
        claimcheck.assert_expected("C13", "VLLM", "fails")
    with pytest.raises(AssertionError, match="'vllm:host-normalized 0.32.0-0.34.0' expects 'holds'"):
        claimcheck.assert_expected("C13", "VLLM host-normalized", "fails")
    assert claimcheck.claim_expect("C14", "VLLM") == claimcheck.CLAIMS["C14"].failures["vllm 0.32.0-0.34.0"]
    _as_release(monkeypatch, "vllm", "0.35.0")
    claimcheck.assert_expected("C13", "VLLM", "fails")  # no row: recorded, not asserted
    _as_release(monkeypatch, "sglang", "0.5.23", git_rev="0123456789abcdef")
    assert claimcheck.active_release() is None
    claimcheck.assert_expected("C14", "SGLANG", "holds")
