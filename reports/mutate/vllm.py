"""``deferlab mutate --vllm SPEC``: the same campaign on vLLM's own code, run by the claims vLLM answers (C13-C15).

What differs from SGLang is only how the claims run and what is probed: the
claim tests are the served-vs-trained ones (``pytest
properties/claims/test_served.py --vllm TREE``,
`reports.versions.matrix.vllm_claims_command`), a tree loads as
`deferlab.impl.vllm.sources.load` loads it, and the probed modules are the
ones the vLLM driver runs (`driver_modules`). The default targets come, as for
SGLang, from the functions the claims' recorded provenance names
(``real: vllm.multimodal.parse.MultiModalDataParser._parse_image_data``, the
served processor's ``preprocess`` and ``get_resize_config``, ...).

Rows are recorded under the ``VLLM`` label, and `mutate_run.run_claims`
reads the SGLang label's only: the claims process loads
`mutate_vllm_plugin`, which relabels the campaign's scratch results file
after the suite wrote it (until run_claims takes the label from its runner).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from deferlab.reference.system.errors import UsageError
from deferlab.reports.mutate import runs as mrun
from deferlab.reports.report import claims as claims_io
from deferlab.reports.versions.matrix import SERVED_CLAIMS, SGLangLoadError, last_line, vllm_claims_command

ENGINES = ("sglang", "vllm")
# The module of the image processor class vLLM's Kimi-K3 path serves with in 0.32.0 and 0.33.0 (the driver reads
# the class off the code: `impl.vllm.sources.served_processor`). A release that moves it still has its functions
# named by provenance (default targets), only not probed: their mutants then run every claim.
SERVED_PROCESSOR = "vllm.transformers_utils.processors.kimi_k25_vision_fused"
# A vLLM tree "loads" when the driver can be built on it: the loader's required modules and the Kimi-K3
# processor the driver imports besides them (a mutant breaking that module's import is killed at load).
PREFLIGHT = (
    "import sys\n"
    "try:\n"
    "    from deferlab.impl.vllm.driver import VLLMPath\n"
    "    path = VLLMPath(sys.argv[1])\n"
    "except Exception as e:\n"
    "    print((str(e).splitlines() or [''])[0] or type(e).__name__, file=sys.stderr)\n"
    "    sys.exit(3)\n"
    "print(path.system)\n"
)


def driver_modules() -> list[str]:
    """The vLLM modules the driver runs: the input parser, ``convert_image_mode``'s module, the Kimi-K3 path,
    the Kimi-K3 HF-style processor, and the served image processor's module."""
    from deferlab.impl.vllm import driver, sources

    return [*sources.REQUIRED, driver.K3_PROCESSOR, SERVED_PROCESSOR]


@dataclass
class VLLMRunner(mrun.Runner):
    """How to run vLLM's claim tests on a tree: the served claims with ``--vllm TREE`` (tests swap in a fake
    engine's script)."""

    package: str = "vllm"
    engine: str = "vllm"  # deferlab.impl.vllm.sources loads the tree in a warm server (`reports.mutate.warm`)
    # Off: on vLLM 0.33.0 a warm child's load record differs from the server's on every run, so each run paid
    # the server and the guard, then ran cold anyway (10.6 s a run against 9.3 s cold, plus the server's start).
    warm: bool = False

    def modules(self) -> list[str]:
        return driver_modules()

    def command(self, tree: Path, nodes: Sequence[str] | None, *, plugin: bool = False) -> list[str]:
        """`vllm_claims_command` on ``tree`` with the served claims' file replaced by ``nodes`` (None: collect
        only), the relabelling plugin, and with ``plugin`` the probes' and first-kill plugin."""
        cmd = vllm_claims_command(str(tree), self.profile)
        where = cmd.index(str(claims_io.suite_path() / SERVED_CLAIMS))
        cmd[where : where + 1] = self.suite_nodes(nodes) if nodes is not None else [cmd[where], "--collect-only"]
        cmd += ["-rfE", "-p", "deferlab.reports.mutate.vllm_plugin"]
        return cmd + (["-p", "deferlab.reports.mutate.select"] if plugin else [])

    def load_check(self, tree: Path, timeout: float) -> None:
        """Raise `SGLangLoadError` (the matrix's one load error, for either engine) when the vLLM driver cannot be
        built on ``tree`` (`PREFLIGHT`: the loader's own one-line refusal, or what building the driver raised)."""
        proc = subprocess.run(
            [sys.executable, "-c", PREFLIGHT, str(tree)], capture_output=True, text=True, timeout=timeout, check=False
        )
        if proc.returncode != 0:
            raise SGLangLoadError(last_line(proc.stderr) or f"building the vLLM driver on {tree} exited {proc.returncode}")  # fmt: skip


def engine_of(args: argparse.Namespace) -> tuple[str, str]:
    """(engine, SPEC) of ``--sglang`` / ``--vllm``: exactly one is given (UsageError in one line otherwise)."""
    given = [(e, getattr(args, e)) for e in ENGINES if getattr(args, e, None) is not None]
    if len(given) > 1:
        raise UsageError("--sglang and --vllm are mutually exclusive: a campaign mutates one engine's code; give one")
    if not given:
        raise UsageError("deferlab mutate needs --sglang SPEC or --vllm SPEC (the engine whose code is mutated)")
    engine, spec = given[0]
    if not spec.strip():
        raise UsageError(f"--{engine}: an empty SPEC; give 'installed', a checkout path or a version")
    return engine, spec.strip()


def runner_for(engine: str, profile: str) -> mrun.Runner:
    """The engine's runner: SGLang's claim suite (`mutate_run.Runner`) or vLLM's served claims."""
    return VLLMRunner(profile=profile) if engine == "vllm" else mrun.Runner(profile=profile)


def served_claims() -> list[str]:
    """The claims a vLLM campaign can run: those claims.toml states expectations for on vLLM's releases."""
    from deferlab.reference.system import claims as claim_registry
    from deferlab.reports.versions.matrix import engine_claims

    return engine_claims(claim_registry.load_claims(), "vllm")


def engine_module(engine: str) -> object:
    """The loader's engine (`impl.loader.engine.Engine`) of ``engine``: how a SPEC resolves."""
    if engine == "vllm":
        from deferlab.impl.vllm.sources import ENGINE
    else:
        from deferlab.impl.sglang.sources import ENGINE
    return ENGINE
