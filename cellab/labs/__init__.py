"""Embedded labs: namespaces on this host that stand in for a real lab (wired, virtual)."""

from __future__ import annotations

import importlib

from cellab.errors import CellabError
from cellab.labs.base import EmbeddedLab

# kind -> "module:Class"; the virtual lab's topology lives in the emulator room.
EMBEDDED_LABS = {
    "wired": "cellab.labs.wired:WiredLab",
    "virtual": "cellab.emulator.vlab:VirtualLab",
}


def embedded_lab_class(kind: str) -> type[EmbeddedLab]:
    if kind not in EMBEDDED_LABS:
        raise CellabError(f"unknown embedded lab {kind!r} (allowed: {', '.join(EMBEDDED_LABS)})")
    module_name, class_name = EMBEDDED_LABS[kind].split(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise CellabError(f"the {kind} lab is not available in this installation: {exc}") from exc
    return getattr(module, class_name)
