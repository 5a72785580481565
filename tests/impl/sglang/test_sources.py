"""`impl.sglang.sources`: which SGLang loads, refused in one line when it cannot, and read off its code.

Source-resolution errors use tiny fake checkouts in ``tmp_path``; cases that
import a tree run in a child process, because a process holds one SGLang.
The wheel cache and the importer themselves are the loader's
(``tests/impl/loader``); here is what SGLang's `ENGINE` makes of them.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from deferlab.impl.loader import wheels
from deferlab.impl.loader.engine import FetchError, SourceError
from deferlab.impl.sglang import sources
from deferlab.impl.sglang.sources import SGLangFetchError, SGLangSourceError
from tests.impl.sglang.support import KIP, REPO, fake_sglang_tree, load_or_skip, run_child, skip_if_unfetched


def test_the_engine_keeps_the_accepted_sentence_and_the_error_classes():
    """The loader words SGLang's errors as before; SGLang's classes are the loader's, specialised."""
    assert sources.ACCEPTED == (
        "accepted: 'installed' (the sglang importable here), a path to an SGLang source checkout "
        "(a folder holding python/sglang/, or the sglang package folder itself), or a release version "
        "such as '0.5.23' (fetched with pip download into the deferlab cache)"
    )
    assert issubclass(SGLangSourceError, SourceError) and issubclass(SGLangFetchError, FetchError)
    assert issubclass(SGLangFetchError, SGLangSourceError)
    assert sources.ENGINE.source_error is SGLangSourceError and sources.ENGINE.fetch_error is SGLangFetchError


KIP_FILE = "srt/multimodal/kimi_k3_image_processing.py"
# A fake checkout (version 9.9.9) whose files name every piece of the deferred feature.
FEATURE_FILES = {
    KIP_FILE: "DEFERRED_PREPROCESSING_KEY = 'k'\n",
    "srt/multimodal/processors/kimi_k3.py": "# _should_defer_gpu_preprocessing\n",
    "srt/models/kimi_k3.py": "# DEFERRED_PREPROCESSING_KEY\n",
}


def test_a_missing_path_and_a_meaningless_spec_are_refused():
    with pytest.raises(SGLangSourceError, match="no such path"):
        sources.load("./no/such/checkout")
    with pytest.raises(SGLangSourceError, match="neither 'installed', an existing path nor a version"):
        sources.load("latest-please")


def test_a_checkout_without_the_deferred_feature_is_refused(tmp_path):
    root = fake_sglang_tree(tmp_path, "9.9.9", {})
    with pytest.raises(SGLangSourceError, match=r"version 9\.9\.9.*no Kimi-K3 CPU-transport deferred preprocessing"):
        sources.load(str(root))


def test_an_unfetchable_wheel_is_refused_and_leaves_nothing(tmp_path):
    def offline(version, dest):
        dest.mkdir(parents=True)
        (dest / f"sglang-{version}-py3-none-any.whl").write_bytes(b"PK\x03\x04 half a wheel")
        raise wheels.DownloadError("Network is unreachable", None)

    with pytest.raises(SGLangFetchError, match="could not fetch the wheel.*Network is unreachable"):
        sources.load("0.5.23", cache=tmp_path, downloader=offline)
    assert list(tmp_path.iterdir()) == []


def test_a_wheel_that_arrives_broken_is_a_finding_not_a_failed_fetch(tmp_path):
    """A download that succeeded with a truncated wheel is refused as unusable (no test may skip on it), and
    leaves nothing in the cache."""

    def truncated(version, dest):
        dest.mkdir(parents=True)
        wheel = dest / f"sglang-{version}-py3-none-any.whl"
        wheel.write_bytes(b"PK\x03\x04 half a wheel")
        return wheel

    with pytest.raises(SGLangSourceError, match="the fetched wheel is unusable.*not a zip archive") as info:
        sources.load("0.5.23", cache=tmp_path, downloader=truncated)
    assert not isinstance(info.value, SGLangFetchError)
    assert list(tmp_path.iterdir()) == []


def test_tests_skip_on_a_failed_fetch_and_on_nothing_else(tmp_path):
    """`load_or_skip`: an unfetchable wheel is a skip; any other load failure reaches the test as itself."""

    def offline(version, dest):
        raise wheels.DownloadError("Network is unreachable", None)

    with pytest.raises(pytest.skip.Exception, match="0.5.23 is not cached"):
        load_or_skip(lambda spec: sources.load(spec, cache=tmp_path, downloader=offline), "0.5.23")
    with pytest.raises(SGLangSourceError, match="no such path") as info:
        load_or_skip(sources.load, str(tmp_path / "nowhere" / "sglang"))
    assert not isinstance(info.value, SGLangFetchError)


def test_offline_a_release_not_cached_is_a_skip_in_process_and_in_a_child_and_nothing_is_fetched(tmp_path, monkeypatch):
    """``DEFERLAB_OFFLINE=1``: the refusal is SGLang's fetch error (a test skips on it, as on an unreachable
    index) and its one line carries the words a child's reader skips on; no download is attempted."""
    from tests.impl.loader.support import no_download

    monkeypatch.setenv("DEFERLAB_OFFLINE", "1")
    with pytest.raises(SGLangFetchError) as info:
        sources.load("0.5.99", cache=tmp_path, downloader=no_download)
    assert str(info.value) == (
        "sglang 0.5.99 is not cached and DEFERLAB_OFFLINE=1 forbids fetching it, so deferlab could not fetch the "
        "wheel; cached: none"
    )
    with pytest.raises(pytest.skip.Exception, match="0.5.99 is not cached"):
        skip_if_unfetched("0.5.99", f"deferlab-load: {info.value}")
    assert list(tmp_path.iterdir()) == []


def test_an_unknown_version_names_what_the_index_has(tmp_path):
    with pytest.raises(SGLangSourceError) as info:
        load_or_skip(lambda spec: sources.load(spec, cache=tmp_path), "0.5.999")
    assert "no sglang==0.5.999" in str(info.value) and "0.5.23" in str(info.value)


def test_one_sglang_per_process(sgl, tmp_path):
    other = fake_sglang_tree(tmp_path, "9.9.9", FEATURE_FILES)
    with pytest.raises(SGLangSourceError, match="one SGLang version per process"):
        sources.load(str(other))
    assert sources.load(sgl.source.spec) is sgl.source


def test_an_import_failure_inside_sglang_names_the_module(tmp_path):
    root = fake_sglang_tree(tmp_path, "9.9.9", {**FEATURE_FILES, KIP_FILE: "DEFERRED_PREPROCESSING_KEY = 1 / 0\n"})
    code = "import sys; from deferlab.impl.sglang import sources; sources.load(sys.argv[1])"
    proc = subprocess.run(
        [sys.executable, "-c", code, str(root)], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode != 0
    assert "importing sglang.srt.multimodal.kimi_k3_image_processing failed inside SGLang" in proc.stderr
    assert "ZeroDivisionError" in proc.stderr


# A tiny checkout's files: the modules the driver requires (empty); each test adds its Kimi-K3 processor or not.
REQUIRED_FILES = {
    f"srt/{rel}": ""
    for rel in (
        "multimodal/processors/kimi_k25.py",
        "managers/schedule_batch.py",
        "managers/mm_utils.py",
        "multimodal/mm_utils.py",
        "models/kimi_k3.py",
    )
}
PROCESSOR_FILE = "srt/multimodal/processors/kimi_k3.py"


def test_a_tree_without_a_kimi_k3_processor_is_refused_in_one_line(tmp_path):
    root = fake_sglang_tree(tmp_path, "0.5.16", REQUIRED_FILES)
    with pytest.raises(SGLangSourceError) as info:
        sources.load(str(root))  # refused from the files: nothing is imported, so it can run in-process
    message = str(info.value)
    assert "\n" not in message
    assert "version 0.5.16" in message and "has no Kimi-K3 multimodal processor" in message
    assert message.endswith("accepted: 0.5.17 and later (or a checkout that has that processor)")


LOAD = (
    "import json, sys\n"
    "from deferlab.impl.sglang import sources\n"
    "try:\n"
    "    s = sources.load(sys.argv[1])\n"
    "    print('JSON:' + json.dumps({'deferred': s.has_deferred_path, 'whitelist': s.whitelist_module}))\n"
    "except sources.SGLangSourceError as e:\n"
    "    print('JSON:' + json.dumps({'error': str(e)}))\n"
)


def test_the_deferred_path_is_read_off_the_code_not_the_version(tmp_path):
    eager = fake_sglang_tree(
        tmp_path / "a", "9.9.9", {**REQUIRED_FILES, PROCESSOR_FILE: "class KimiK3ImageProcessor:\n    pass\n"}
    )
    gate = "class KimiK3ImageProcessor:\n    def _should_defer_gpu_preprocessing(self, images):\n        return True\n"
    half = fake_sglang_tree(tmp_path / "b", "0.5.17", {**REQUIRED_FILES, PROCESSOR_FILE: gate})
    got = [run_child(LOAD, str(root), timeout=180) for root in (eager, half)]
    assert got[0] == {"deferred": False, "whitelist": "sglang.srt.managers.mm_utils"}  # "9.9.9", yet eager-only
    error = got[1]["error"]  # "0.5.17", yet it has a gate: an incomplete deferred path, refused
    assert "\n" not in error and "an incomplete Kimi-K3 CPU-transport deferred preprocessing" in error
    assert f"{KIP}.DEFERRED_PREPROCESSING_KEY is absent" in error and "_should_defer_gpu_preprocessing" not in error
