"""The rehearsal stack's control socket (zmq_stack_control): the virtual cell's `stats` answered from srsue's own
metrics, so a virtual UE agent on it says whether its srsue is attached; srsue's CSV read at its newest whole row."""

from __future__ import annotations

import pytest

from cellab.labs.cellctl import CellControl, CellControlError
from cellab.ran.zmq_stack_control import NO_SIGNAL_DBM, StackControl, last_metrics


def test_the_newest_whole_row_of_srsues_metrics(tmp_path):
    csv = tmp_path / "srsue_metrics.csv"
    csv.write_text("time;rsrp;dl_snr\n1000;54.7;30.1\n2000;44.5;20.2\n3000;4")  # the last line cut by a write
    assert last_metrics(csv) == {"time": 2000.0, "rsrp": 44.5, "dl_snr": 20.2}
    csv.write_text("time;rsrp;dl_snr\n")
    assert last_metrics(csv) == {} and last_metrics(tmp_path / "none.csv") == {}


def test_stats_says_each_ues_state_and_the_attenuation_ops_still_answer(tmp_path):
    gains: dict[int, float] = {}
    attached = {0: True, 1: False}

    def ue_stats(ue: int) -> dict:
        return {"ue": ue, "rrc_state": "connected" if attached[ue] else "idle",
                "rsrp_dbm": 50.0 if attached[ue] else NO_SIGNAL_DBM, "sinr_db": None}

    endpoint = f"ipc://{tmp_path}/ctl"
    control = StackControl(endpoint, 2, gains.__setitem__, lambda ue: gains.get(ue, 0.0), ue_stats)
    try:
        with CellControl(endpoint) as cell:
            assert cell.ue_stats(0)["rrc_state"] == "connected" and cell.ue_stats(1)["rsrp_dbm"] == NO_SIGNAL_DBM
            cell.request("set_attenuation", ue=1, attenuation_db=12.5)
            assert gains == {1: 12.5}
            with pytest.raises(CellControlError, match="cannot hold one UE's host.*radio_outage"):
                cell.request("set_ue_host", ue=0, up=False)  # holding a UE's host is the virtual cell's
            with pytest.raises(CellControlError, match="allowed set_attenuation, get_attenuation"):
                cell.request("reboot", ue=0)
    finally:
        control.stop()
