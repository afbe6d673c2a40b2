"""What an eNB and a core must agree on for a UE to attach: PLMN, TAC, and where the MME is.

The RAN room reads it from an eNB profile, the core room from a core profile (entry point group
`cellab.identity`, names `enb` and `core`: a function `(path) -> NetworkIdentity`); the core compares
them without importing either room (`cellab ran check --core`, `cellab validate lab.yaml`)."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from cellab.contracts.base import Model


class NetworkIdentity(Model):
    source: str = Field(description="the profile file it was read from")
    mcc: str = Field(pattern=r"^\d{3}$")
    mnc: str = Field(pattern=r"^\d{2,3}$")
    tacs: list[int] = Field(description="the eNB's cells' TACs, or the core's TAC list")
    mme_addrs: list[str] = Field(description="eNB: the MME address(es) it dials; core: the S1-MME address(es) it binds")
    cell_ids: list[int] = Field(default_factory=list, description="eNB: its cells' cell_id, in profile order "
                                                                  "(srsENB's cell_gain names a cell by it)")
    radio: str = Field("", description="eNB: its radio (rf.device.kind: uhd, zmq)")
    flavour: str = Field("", description="core: the flavour the profile names ('' when it names none)")
    # field names inside the profile, for messages that name both files and fields
    fields: dict[str, str] = Field(default_factory=dict, description="'mcc'|'mnc'|'tac'|'mme' -> dotted field path")


def identity_mismatches(enb: NetworkIdentity, core: NetworkIdentity) -> list[str]:
    """One line per disagreement, naming both files and fields; empty when they agree."""

    def where(ident: NetworkIdentity, key: str) -> str:
        return f"{ident.source}: {ident.fields.get(key, key)}"

    problems = []
    if (enb.mcc, enb.mnc) != (core.mcc, core.mnc):
        problems.append(f"PLMN {enb.mcc}-{enb.mnc} ({where(enb, 'mcc')}, {where(enb, 'mnc')}) differs from the core's "
                        f"{core.mcc}-{core.mnc} ({where(core, 'mcc')}, {where(core, 'mnc')})")
    for tac in enb.tacs:
        if tac not in core.tacs:
            problems.append(f"TAC {tac} ({where(enb, 'tac')}) is not in the core's TAC list {core.tacs} ({where(core, 'tac')})")
    if enb.mme_addrs and core.mme_addrs and not set(enb.mme_addrs) & set(core.mme_addrs):
        problems.append(f"MME address {', '.join(enb.mme_addrs)} ({where(enb, 'mme')}) is not where the core listens: "
                        f"{', '.join(core.mme_addrs)} ({where(core, 'mme')})")
    return problems


def load_identity(kind: str, path: Path) -> NetworkIdentity:
    """kind: 'enb' or 'core'; the reading room is found through its entry point."""
    from cellab.contracts.registry import load

    return load("cellab.identity", kind, "profile reader")(path)
