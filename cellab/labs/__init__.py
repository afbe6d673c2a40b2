"""Embedded labs: namespaces on this host that stand in for a real lab (wired, virtual, ...).

Each kind is registered by the room that builds it (entry point group `cellab.labs`)."""

from __future__ import annotations

from cellab.contracts.registry import load, registered
from cellab.labs.base import EmbeddedLab

# kind -> "module:Class"
EMBEDDED_LABS = dict(sorted(registered("cellab.labs").items()))


def embedded_lab_class(kind: str) -> type[EmbeddedLab]:
    return load("cellab.labs", kind, "embedded lab")
