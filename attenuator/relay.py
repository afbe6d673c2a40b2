"""srsENB's `cell_gain` as a lab inventory's attenuator: an attenuator agent inside the controller's process.

The eNB agent serves the eNB contract (its `cell_gain` operation sets srsENB's software gain); the runs drive
attenuators through the attenuator contract (set, schedules, safe state). The relay joins them: an attenuator
agent on the controller's bus whose `srsenb-cell-gain` entries send each command to the eNB agent's `cell_gain`
through the controller, so schedules, limits and the safe state work as on any attenuator, and each agent keeps
its one contract. `cellab.run.session` starts it (entry point `cellab.services: cell_gain_relay`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from cellab.errors import CellabError

from .agent import AttenuatorAgent

#: (cell_id, gain_db) -> None, raising CellabError when the eNB agent refuses (e.g. EnbClient.cell_gain)
CellGain = Callable[[int, float], Any]


def start_cell_gain_relay(name: str, controller_endpoint: str, *, cell_gain: CellGain, secret_key_file: Path,
                          controller_key_file: Path, artifact_dir: Path,
                          telemetry_endpoint: str | None = None) -> AttenuatorAgent:
    """An attenuator agent named `name`, serving in a thread of this process until its stop() (which sends
    its channels to their safe state first, through cell_gain)."""

    def send(op: str, params: dict) -> dict:
        if op != "cell_gain":
            return {"ok": False, "error": f"the relay sends only cell_gain, not {op!r}"}
        try:
            cell_gain(int(params["cell_id"]), float(params["gain_db"]))
        except CellabError as exc:  # the eNB agent refused (srsenb not running, no such cell) or is gone
            return {"ok": False, "error": str(exc)}
        return {"ok": True}

    agent = AttenuatorAgent(name, controller_endpoint, telemetry_endpoint=telemetry_endpoint,
                            secret_key_file=secret_key_file, controller_public_keys=[controller_key_file],
                            artifact_dir=artifact_dir, enb_send=send)
    agent.start()
    return agent
