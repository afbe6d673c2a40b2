"""Inventory entry of one attenuator (what exists and where); the lab inventory embeds this model as-is."""

from __future__ import annotations

from pathlib import Path
from cellab.contracts.attenuator import (  # noqa: F401  (the room's names for the core's entry model)
    MODEL_MIN_INTERVAL_S,
    MODEL_TRANSPORTS,
    AttenuatorConfig,
    Model,
    Transport,
)

def load_config(path: str | Path, name: str | None = None) -> AttenuatorConfig:
    """One attenuator from a YAML file: either the entry itself or a mapping with `attenuators: [...]`."""
    from pydantic import ValidationError

    from cellab.errors import InputError, from_validation_error
    from cellab.inputs import read_yaml

    p = Path(path)
    data = read_yaml(p)
    prefix = ""
    if isinstance(data, dict) and isinstance(data.get("attenuators"), list):
        entries = [e for e in data["attenuators"] if isinstance(e, dict)]
        names = [str(e.get("name")) for e in entries]
        if name is None and len(entries) == 1:
            data, prefix = entries[0], "attenuators[0]"
        elif name in names:
            idx = names.index(name)
            data, prefix = entries[idx], f"attenuators[{idx}]"
        else:
            raise InputError(p, "attenuators", f"choose one attenuator by name (got {name!r})", names)
    if not isinstance(data, dict):
        raise InputError(p, "", "expected a mapping (one attenuator entry)", list(AttenuatorConfig.model_fields))
    try:
        return AttenuatorConfig.model_validate(data)
    except ValidationError as exc:
        raise from_validation_error(p, exc, prefix) from None
