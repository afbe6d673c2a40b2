"""Embedded labs: namespaces on this host that stand in for a real lab (wired, virtual, ...).

Each kind is registered by the room that builds it (entry point group `cellab.labs`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from cellab.contracts.registry import load, registered

if TYPE_CHECKING:  # the registry needs no lab: a lab's own modules (instances) may look a kind up
    from cellab.labs.base import EmbeddedLab

# kind -> "module:Class"
EMBEDDED_LABS = dict(sorted(registered("cellab.labs").items()))


def embedded_lab_class(kind: str) -> type[EmbeddedLab]:
    return load("cellab.labs", kind, "embedded lab")
