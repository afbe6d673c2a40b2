"""Typed role contracts (server, enb, core, ue, attenuator) and the registry of their implementations.

The names below load `cellab.contracts.base` on first use (PEP 562): the registry (`cellab.contracts.registry`),
which every `cellab` start reads to mount commands and find labs, needs none of the contracts' models."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = ["Contract", "ContractError", "Empty", "Model", "Op", "RoleClient", "implements"]

if TYPE_CHECKING:
    from cellab.contracts.base import Contract, ContractError, Empty, Model, Op, RoleClient, implements


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module 'cellab.contracts' has no attribute {name!r}")
    from cellab.contracts import base

    value = getattr(base, name)
    globals()[name] = value
    return value
