"""Where the core finds the rooms' pieces without importing them: Python entry points.

A room registers in pyproject.toml, e.g.
    [project.entry-points."cellab.agents"]
    "ue.android" = "cellab.ue.android.agent:AndroidUEAgent"
Groups: `cellab.agents` (ROLE.KIND -> Agent class), `cellab.labs` (lab kind -> EmbeddedLab class),
`cellab.commands` (sub-command name -> typer app).
"""

from __future__ import annotations

from importlib.metadata import entry_points
from typing import Any

from cellab.errors import CellabError


#: each role's implementation when `--kind` is not given
DEFAULT_AGENT_KIND = {"server": "linux", "ue": "virtual", "attenuator": "any", "enb": "srsran", "core": "epc"}

def registered(group: str) -> dict[str, str]:
    """name -> "module:attr" of every entry point in `group`."""
    return {ep.name: ep.value for ep in entry_points(group=group)}


def load(group: str, name: str, what: str) -> Any:
    eps = {ep.name: ep for ep in entry_points(group=group)}
    if name not in eps:
        raise CellabError(f"unknown {what} {name!r} (allowed: {', '.join(sorted(eps)) or 'none installed'})")
    try:
        return eps[name].load()
    except (ImportError, AttributeError) as exc:
        raise CellabError(f"{what} {name} is not available in this installation: {exc}") from exc


def agent_class(role: str, kind: str) -> type:
    return load("cellab.agents", f"{role}.{kind}", "agent role.kind")
