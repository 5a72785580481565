"""The upstream versions deferlab models, as data: the PR as merged, before it, the later fixes, the releases.

A shared description, not an algorithm: ``impl`` (the system under test)
switches its behaviour on these fields, ``sim`` reads them to account for
each version, and the property suites parametrize over them, so it lives
beside the shared config and contract types. One frozen `Policy` object is
passed everywhere behaviour differs, so a property can run the same input
under each and show which one breaks a claim.

Which real release each policy matches (``deferlab versions``: the claim
verdicts of the wheel, run through ``impl.sglang``, equal the policy's
expectations in ``reference/system/claims.toml``), or why none can:

* `PRE_PR`: the 0.5.17 wheel (eager only) and the PR's parent commit
  d0aa37b49, which behave alike on every claim.
* `INTERIM_3D3194F`: the 0.5.18 wheel (the local-index grid bug).
* `RELEASED_0_5_19`: the 0.5.19, 0.5.20 and 0.5.21 wheels (late IPC releases).
* `RELEASED`: the 0.5.22 and 0.5.23 wheels (the newest release).
* `PR_33921`: no release (the PR as merged, with a dict contract and a
  "cannot mix" error, lived on ``main`` only), but its commit 22e003580, run
  from a source checkout (``deferlab report --sglang PATH``), gives exactly
  its verdicts; so do 63833f803 and 8554d9a5b. It stays the default, because
  the testbed's first subject is the PR.
* `INTERIM_418975B`: no release (the two days in which the consumer read a
  ``backend`` key the non-EPD producer never wrote fell between releases);
  its commit 418975ba6, run from a checkout, matches it.
* `HARDENED`: none by design: deferlab's recommendation (`RELEASED`, plus
  validation of every input before any work, and a per-image gate on both
  call sites).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from deferlab.reference.system.errors import InputValueError

ContractForm = Literal["pr-dict", "epd-dict", "dataclass"]
IpcCount = Literal["tp_size", "configured_tp_size", "dp_group", "own_word"]
LateAcks = Literal["ignored", "overwrite", "count"]
GridCheck = Literal["none", "local", "global"]


@dataclass(frozen=True)
class Policy:
    """Every behavioural switch between the upstream versions deferlab models."""

    name: str
    # Processor / gate
    defer_enabled: bool = True  # PRE_PR: eager only
    # Every call site of the gate, (name, decides per image), the default first (semantics §4.1, §12.2): up to
    # the PR one request-wide call; from 3d3194f6c the processor resolves per-image artifacts through its
    # preprocess cache ("artifact", one image per call) and keeps the old request-wide call for cache-off and
    # preprocessed requests ("request").
    gate_paths: tuple[tuple[str, bool], ...] = (("request", False),)
    # Scheduler (semantics §1.3): the PR added Kimi-K3 to the pre-embed skip whitelist
    k3_skips_pre_embed_move: bool = True
    # Contract (semantics §5)
    contract: ContractForm = "pr-dict"  # what the non-EPD producer writes
    epd_contract: ContractForm = "pr-dict"  # what the EPD producer writes
    consumer_reads_backend: bool = False  # 418975ba6+: the consumer reads config["backend"]
    epd_deferred: bool = True  # 418975ba6+: the EPD encoder has a deferred (owner-only) producer; at the PR it had none
    # Consumer (semantics §6)
    mixed_batches: Literal["raise", "accept"] = "raise"
    grid_check: GridCheck = "none"  # "local": the interim bug indexing global grids with local positions
    # IPC (semantics §8)
    ipc_consumer_count: IpcCount = "tp_size"  # "own_word": the owner acks its own word only (K_c = 1, 0.5.22+)
    ipc_clamp: bool = False  # released clamps K_c to min(K_c, K_p)
    # Whether ranks that never read an item release it at request end (None: the semantics leave it open, and the
    # simulator tries both), and what such a late write does to a slot already reused for another item.
    ipc_non_owner_release: bool | None = None
    ipc_late_acks: LateAcks = "ignored"
    ipc_pool: Literal["counter", "generation"] | None = None  # None: open (the PR's pool is not stated)
    # deferlab's own hardening
    validate_inputs: bool = False

    def with_(self, **changes: object) -> Policy:
        return replace(self, **changes)

    @property
    def call_sites(self) -> tuple[tuple[str, bool], ...]:
        """The gate's call sites as (name, decides per image), the default first."""
        return self.gate_paths

    @property
    def gate_per_image(self) -> bool:
        """Whether the default call site decides per image (3d3194f6c+), read off ``gate_paths``."""
        return self.gate_paths[0][1]

    def gate_path(self, name: str | None) -> tuple[str, bool]:
        """The named call site (None: the default); an unknown name lists the known ones."""
        sites = self.call_sites
        if name is None:
            return sites[0]
        for site in sites:
            if site[0] == name:
                return site
        raise InputValueError(f"policy {self.name} has no gate call site {name!r}; known: {[s[0] for s in sites]}")


# The PR as merged (commit 22e003580, run from a checkout): the PR-era counter pool, which frees a chunk when its
# counter reaches server_args.tp_size; the owner adds the live TP size (equal); no rank releases at request end;
# no EPD deferred producer yet.
PR_33921 = Policy(name="PR_33921", epd_deferred=False, ipc_pool="counter", ipc_non_owner_release=False)
# Before the deferred feature (the PR's parent d0aa37b49 and the 0.5.17 wheel, both run): eager only, the same pool.
# An RGB image with a stray transparency key was never promoted to RGBA on any K3 commit (the code says it must not
# be), whatever the first specification of this project read.
PRE_PR = PR_33921.with_(name="PRE_PR", defer_enabled=False, k3_skips_pre_embed_move=False)
INTERIM_418975B = Policy(
    name="INTERIM_418975B",
    contract="pr-dict",
    epd_contract="epd-dict",
    consumer_reads_backend=True,
    ipc_consumer_count="configured_tp_size",
)
INTERIM_3D3194F = Policy(  # = the 0.5.18 wheel (versions matrix), whose ranks release nothing at request end
    name="INTERIM_3D3194F",
    contract="dataclass",
    epd_contract="dataclass",
    consumer_reads_backend=True,
    mixed_batches="accept",
    grid_check="local",
    gate_paths=(("artifact", True), ("request", False)),
    ipc_consumer_count="configured_tp_size",
    ipc_non_owner_release=False,
)
# 0.5.19-0.5.21: the global-index grid fix, but the owner acknowledges the whole group while every rank also
# releases its own word at request end; that late write lands in a slot already reused for the next item
# (found by running those releases' own release path; semantics §8.4).
RELEASED_0_5_19 = INTERIM_3D3194F.with_(
    name="RELEASED_0_5_19",
    grid_check="global",
    ipc_consumer_count="dp_group",
    ipc_clamp=True,
    ipc_non_owner_release=True,
    ipc_late_acks="overwrite",
)
# 0.5.22 and later (the newest release): each rank acknowledges only its own word, the owner when it reads,
# the others when they release; every word is written once per item.
RELEASED = RELEASED_0_5_19.with_(name="RELEASED", ipc_consumer_count="own_word")
# deferlab's recommendation: validate at the front door, and decide per image on every call site.
HARDENED = RELEASED.with_(name="HARDENED", validate_inputs=True, gate_paths=(("artifact", True), ("request", True)))

POLICIES: dict[str, Policy] = {
    p.name: p
    for p in (
        PR_33921,
        PRE_PR,
        INTERIM_418975B,
        INTERIM_3D3194F,
        RELEASED_0_5_19,
        RELEASED,
        HARDENED,
    )
}
DEFAULT_POLICY = PR_33921


def get_policy(name: str | Policy) -> Policy:
    """Look a policy up by name (case-insensitive); a `Policy` passes through."""
    if isinstance(name, Policy):
        return name
    for key, pol in POLICIES.items():
        if key.lower() == str(name).lower():
            return pol
    raise InputValueError(f"unknown policy {name!r}; known: {', '.join(POLICIES)}")
