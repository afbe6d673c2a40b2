"""Typed role contracts (server, enb, core, ue, attenuator) and the registry of their implementations."""

from cellab.contracts.base import Contract, ContractError, Empty, Model, Op, RoleClient, implements

__all__ = ["Contract", "ContractError", "Empty", "Model", "Op", "RoleClient", "implements"]
