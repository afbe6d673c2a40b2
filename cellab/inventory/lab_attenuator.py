"""The attenuator in front of a lab's UEs: what campaign validation checks schedules and attenuation
values against, and what the session and runner drive through the attenuator agent.

Virtual lab: the Mini-Circuits serial emulator bridged to the emulated cell (one channel per UE),
driven by an attenuator agent the session starts. A lab inventory: the attenuator and channel its
first UE names (`devices.ues[0].attenuator`), driven by the agent the inventory lists for it.
The wired lab has none.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from cellab.contracts.attenuator import AttenuatorConfig

if TYPE_CHECKING:
    from cellab.inventory.model import Inventory


@dataclass(frozen=True)
class LabAttenuator:
    config: AttenuatorConfig  # limits, step and slew the schedules must respect
    ue_channels: tuple[int | None, ...]  # the channel in front of UE i (None: that UE is not behind this box)
    agent: str | None = None  # inventory: the agent that drives it (embedded labs start their own)

    @property
    def name(self) -> str:
        return self.config.name


def lab_attenuator(lab: str, ues: int | None = None) -> LabAttenuator | None:
    """The attenuator of an embedded lab kind or a lab inventory file (None when the lab has none); an embedded
    lab's with a channel per UE of `ues` (None: as many as the lab may run, what validation checks against)."""
    from cellab.labs import EMBEDDED_LABS, embedded_lab_class

    if lab in EMBEDDED_LABS and getattr(embedded_lab_class(lab), "cell_attenuator", False):
        from cellab.contracts.attenuator import planning

        ues = ues if ues is not None else int(getattr(embedded_lab_class(lab), "max_ues", 1))

        # The serial device path is the session's; limits and step are what validation needs.
        max_db = embedded_lab_class(lab).attenuator_max_db
        return LabAttenuator(planning().virtual_lab_attenuator("", ues, max_db), tuple(range(1, ues + 1)))
    if lab in EMBEDDED_LABS or lab == "bench":  # bench: any of a cluster's, unknown until a worker takes the run
        return None
    from cellab.inventory.model import load_inventory

    return inventory_attenuator(load_inventory(lab))


def inventory_attenuator(inventory: Inventory) -> LabAttenuator | None:
    """The box in front of the inventory's first UE that names one, with the channel of every UE behind it."""
    found = [inventory.ue_attenuator(i) for i in range(len(inventory.devices.ues))]
    first = next((f for f in found if f is not None), None)
    if first is None:
        return None
    entry = first[0]
    channels = tuple(f[1] if f is not None and f[0].name == entry.name else None for f in found)
    return LabAttenuator(AttenuatorConfig(**entry.model_dump(exclude={"agent"})), channels, entry.agent)
