"""The upstream versions deferlab models, as data: the PR as merged, before it, and the later fixes.

A shared description, not an algorithm: ``impl`` (the system under test)
switches its behaviour on these fields, ``sim`` reads them to account for
each version, and the property suites parametrize over them, so it lives
beside the shared config and contract types. One frozen `Policy` object is passed everywhere behaviour differs, so a
property can run the same input under each and show which one breaks a claim.
The default is `PR_33921`: the testbed reproduces the system as merged, flaws
included. `HARDENED` is what deferlab recommends. The two ``INTERIM_*``
policies reproduce intermediate upstream states that shipped real bugs
(semantics §5 and §6), so the contract and batch-invariance properties have a known
positive to catch.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from reference.errors import InputValueError

ContractForm = Literal["pr-dict", "epd-dict", "dataclass"]
IpcCount = Literal["tp_size", "configured_tp_size", "dp_group"]
GridCheck = Literal["none", "local", "global"]


@dataclass(frozen=True)
class Policy:
    """Every behavioural switch between the upstream versions deferlab models."""

    name: str
    # Processor / gate
    defer_enabled: bool = True  # PRE_PR: eager only
    promote_rgb_transparency: bool = False  # PRE_PR eager path promoted RGB+transparency to RGBA
    gate_per_image: bool = False  # 3d3194f6c+: one decision per image instead of per request
    # Scheduler (semantics §1.3): the PR added Kimi-K3 to the pre-embed skip whitelist
    k3_skips_pre_embed_move: bool = True
    # Contract (semantics §5)
    contract: ContractForm = "pr-dict"  # what the non-EPD producer writes
    epd_contract: ContractForm = "pr-dict"  # what the EPD producer writes
    consumer_reads_backend: bool = False  # 418975ba6+: the consumer reads config["backend"]
    # Consumer (semantics §6)
    mixed_batches: Literal["raise", "accept"] = "raise"
    grid_check: GridCheck = "none"  # "local": the interim bug indexing global grids with local positions
    # IPC (semantics §8)
    ipc_consumer_count: IpcCount = "tp_size"
    ipc_clamp: bool = False  # released clamps K_c to min(K_c, K_p)
    # deferlab's own hardening
    validate_inputs: bool = False

    def with_(self, **changes: object) -> Policy:
        return replace(self, **changes)


PR_33921 = Policy(name="PR_33921")
PRE_PR = Policy(name="PRE_PR", defer_enabled=False, promote_rgb_transparency=True, k3_skips_pre_embed_move=False)
INTERIM_418975B = Policy(
    name="INTERIM_418975B",
    contract="pr-dict",
    epd_contract="epd-dict",
    consumer_reads_backend=True,
    ipc_consumer_count="configured_tp_size",
)
INTERIM_3D3194F = Policy(
    name="INTERIM_3D3194F",
    contract="dataclass",
    epd_contract="dataclass",
    consumer_reads_backend=True,
    mixed_batches="accept",
    grid_check="local",
    gate_per_image=True,
    ipc_consumer_count="configured_tp_size",
)
RELEASED = Policy(
    name="RELEASED",
    contract="dataclass",
    epd_contract="dataclass",
    consumer_reads_backend=True,
    mixed_batches="accept",
    grid_check="global",
    gate_per_image=True,
    ipc_consumer_count="dp_group",
    ipc_clamp=True,
)
HARDENED = RELEASED.with_(name="HARDENED", validate_inputs=True)

POLICIES: dict[str, Policy] = {
    p.name: p for p in (PR_33921, PRE_PR, INTERIM_418975B, INTERIM_3D3194F, RELEASED, HARDENED)
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
