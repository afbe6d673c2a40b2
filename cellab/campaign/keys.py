"""The campaign's key hints for error messages: its root models, where each key belongs (run parameters as
`fixed.KEY`, a UE's under `ues[]`), and which labs take a run parameter. Registered with `cellab.keyindex` when
the campaign's loader is imported."""

from __future__ import annotations

from pydantic import BaseModel

from cellab import keyindex
from cellab.campaign.model import Campaign, TransportParams
from cellab.errors import CellabError
from cellab.keyindex import walk

RUN_PARAMS_SET_ELSEWHERE = {"n_ues": "ues"}  # lab parameters a campaign sets through another key


def embedded_lab_kinds() -> list[str]:
    from cellab.labs import EMBEDDED_LABS

    return list(EMBEDDED_LABS)


def campaign_key_locations() -> dict[str, list[str]]:
    """key -> the paths where it is allowed in a campaign (run parameters as `fixed.KEY`)."""
    out: dict[str, list[str]] = {}

    def add(key: str, where: str) -> None:
        if where not in out.setdefault(key, []):
            out[key].append(where)

    for key, where in walk(Campaign, ""):
        add(key, where)
    params: list[type[BaseModel]] = [TransportParams]
    try:
        from cellab.labs import embedded_lab_class

        params += [embedded_lab_class(k).params_model for k in embedded_lab_kinds()]
    except CellabError:  # a room not installed: its parameters are not suggested
        pass
    for model in params:
        for name in model.model_fields:
            if name not in RUN_PARAMS_SET_ELSEWHERE:
                add(name, f"fixed.{name}")
    for key, where in walk(TransportParams, ""):
        if where.startswith("ues[]."):
            add(key, f"fixed.{where}")
    return out


def labs_with_param(name: str) -> list[str]:
    """The embedded labs whose own run parameters include `name` (and `inventory` for an eNB's radio ones)."""
    from cellab.labs import embedded_lab_class

    labs = []
    for kind in embedded_lab_kinds():
        try:
            if name in embedded_lab_class(kind).params_model.model_fields and name not in RUN_PARAMS_SET_ELSEWHERE:
                labs.append(kind)
        except CellabError:
            continue
    from cellab.contracts.enb import RadioOverrides

    if name in RadioOverrides.model_fields or name == "attenuation_db":
        labs.append("inventory")
    return labs


# RunParams: a lab's run parameters on top of TransportParams (cellab.campaign.model.params_model_for); the keys a
# person nests are a UE's, under `ues`
keyindex.register_root("Campaign", Campaign, "campaign")
keyindex.register_root("RunParams", TransportParams, "campaign")
keyindex.register_root("TransportParams", TransportParams, "campaign")
keyindex.register_scope("campaign", campaign_key_locations)
keyindex.register_param_labs(labs_with_param)
