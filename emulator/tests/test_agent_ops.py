"""The bus operations mixin, called as the agent would call them (validated params models)."""

from __future__ import annotations

import pytest
from cellab.emulator.agent import ConfigureParams, LabUpParams, SetAttenuationParams, UeParams, VirtualLabOps
from pyroute2 import netns

from cellab.bus import OperationFailed


def test_ops_drive_the_virtual_lab_and_safe_state_tears_it_down(require_root, netns_prefix, tmp_path):
    ops = VirtualLabOps()
    ops.artifact_dir = tmp_path
    with pytest.raises(OperationFailed, match="not up"):
        ops.cell_stats()
    with pytest.raises(OperationFailed, match="n_prb"):
        ops.lab_up(LabUpParams(prefix=netns_prefix, params={"n_prb": 7}))
    assert not [n for n in netns.listnetns() if n.startswith(netns_prefix + "-")]
    try:
        topo = ops.lab_up(LabUpParams(prefix=netns_prefix, params={"n_prb": 6}, ues=2))
        assert topo["server"]["netns"] == f"{netns_prefix}-srv" and len(topo["ues"]) == 2 and topo["ue_count"] == 2
        assert ops.set_attenuation(SetAttenuationParams(ue=1, attenuation_db=33.0))["attenuation_db"] == 33.0
        assert ops.get_attenuation(UeParams(ue=1))["rsrp_dbm"] == pytest.approx(-93.0)
        with pytest.raises(OperationFailed, match="ue"):
            ops.get_attenuation(UeParams(ue=5))
        ops.lab_configure(ConfigureParams(params={"sr_period_ms": 10, "cc": "cubic"}))
        stats = ops.cell_stats()
        assert [u["sr_period_ms"] for u in stats["ues"]] == [10, 10]
        # srsENB-style SR resources: UE k on the k-th even subframe slot (I_SR = period - 5 + 2k)
        assert [u["i_sr"] for u in stats["ues"]] == [5, 7] and [u["sr_offset"] for u in stats["ues"]] == [0, 2]
        files = ops.collect_tti_log()
        assert (tmp_path / files["cell_tti_log"]).stat().st_size > 28
    finally:
        ops.safe_state()
    assert not [n for n in netns.listnetns() if n.startswith(netns_prefix + "-")]
    ops.safe_state()  # idempotent
