"""The switchable upstream behaviours ``impl`` implements: re-exported from `reference.versions`.

The version descriptions are shared types (``sim`` and the properties read
them too), so they live in ``reference``; this module keeps the import path
``impl.policy`` that users and the README's examples use.
"""

from reference.versions import (
    DEFAULT_POLICY,
    HARDENED,
    INTERIM_3D3194F,
    INTERIM_418975B,
    POLICIES,
    PR_33921,
    PRE_PR,
    RELEASED,
    RELEASED_0_5_19,
    ContractForm,
    GridCheck,
    IpcCount,
    Policy,
    get_policy,
)

__all__ = [
    "DEFAULT_POLICY",
    "HARDENED",
    "INTERIM_3D3194F",
    "INTERIM_418975B",
    "POLICIES",
    "PR_33921",
    "PRE_PR",
    "RELEASED",
    "RELEASED_0_5_19",
    "ContractForm",
    "GridCheck",
    "IpcCount",
    "Policy",
    "get_policy",
]
