"""The virtual UE agent's `signal`: its RSRP as the emulated cell reports it, over the bus (what the
calibration sweep reads at each attenuation); outside the virtual lab it says it has no radio."""

from __future__ import annotations

import pytest
from cellab.ue.virtual_ue import VirtualUEAgent

from cellab.bus import OperationError
from cellab.bus.testing import lab_bus
from cellab.labs.cellctl import CellControl


def test_signal_follows_the_cells_attenuation(require_root, netns_prefix, tmp_path):
    from cellab.labs import embedded_lab_class
    VirtualLab = embedded_lab_class("virtual")  # the emulator room's lab, found through the registry

    lab = VirtualLab(prefix=netns_prefix, params={"n_prb": 6, "n_ues": 2, "attenuation_db": [20.0, 50.0]})
    try:
        topo = lab.up()
        ctl = topo.extra["ctl"]
        with lab_bus(tmp_path, {"ue1": VirtualUEAgent},
                     agent_kwargs={"ue1": {"cell_ctl": ctl, "cell_ue": 1}}) as (controller, _):
            before = controller.request("ue1", "signal", {}, timeout_s=5)
            with CellControl(ctl) as cell:
                cell.set_attenuation(1, 40.0)
            after = controller.request("ue1", "signal", {}, timeout_s=5)
    finally:
        lab.down()
    assert before["source"] == "emulated cell" and 0 <= before["cqi"] <= 15
    assert after["rsrp_dbm"] - before["rsrp_dbm"] == pytest.approx(10.0, abs=0.01)  # UE 1's own 50 → 40 dB


def test_signal_without_a_radio_is_refused(tmp_path):
    with lab_bus(tmp_path, {"ue1": VirtualUEAgent}) as (controller, _):
        with pytest.raises(OperationError, match="has no radio to read"):
            controller.request("ue1", "signal", {}, timeout_s=5)
