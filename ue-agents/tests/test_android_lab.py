"""Lab kind `virtual-android`: virtual phones in the UE namespaces, behind the fake adb server, read by the
real adb client; the session's UE agent spec is the Android agent. Needs root (namespaces)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from cellab.bus.testing import lab_bus
from cellab.contracts.registry import load
from cellab.labs.cellctl import CellControl
from cellab.ue.android.adbclient import Adb
from cellab.ue.android.agent import AndroidUEAgent

pytestmark = [pytest.mark.root,
              pytest.mark.skipif(shutil.which("adb") is None, reason="needs Debian's adb client (make setup)")]


def test_virtual_android_lab_puts_a_phone_on_each_ue(tmp_path: Path, require_root, netns_prefix) -> None:
    lab_cls = load("cellab.labs", "virtual-android", "embedded lab")
    lab = lab_cls(prefix=netns_prefix, ues=2)
    try:
        topo = lab.up()
        port = topo.extra["adb_port"]
        assert [e.serial for e in Adb(port).devices()] == topo.extra["phones"] == \
            [f"vphone-{netns_prefix}-0", f"vphone-{netns_prefix}-1"]
        spec = lab.ue_agent_spec("ue1", 1, topo.ues[1])
        assert (spec.role, spec.kind, spec.netns) == ("ue", "android", None)
        assert spec.args == ("--serial", f"vphone-{netns_prefix}-1", "--adb-port", str(port))
        with lab_bus(tmp_path, {"ue1": AndroidUEAgent},
                     agent_kwargs={"ue1": {"serial": spec.args[1], "adb_port": int(spec.args[3])}}) as (controller, _):
            with CellControl(topo.extra["ctl"]) as cell:
                cell_rsrp = cell.ue_stats(1)["rsrp_dbm"]
            assert controller.request("ue1", "signal")["rsrp_dbm"] == pytest.approx(cell_rsrp, abs=1.0)
            info = controller.request("ue1", "phone_info")
            assert (info["model"], info["rooted"]) == ("Pixel 8", True)
        again = lab.up()  # up() rebuilds the lab (it first clears leftovers): fresh server, same phones
        assert [e.serial for e in Adb(again.extra["adb_port"]).devices()] == topo.extra["phones"]
    finally:
        lab.down()
    assert lab.adb_server is None


def test_calibration_auto_through_the_phone_agents_signal(tmp_path: Path, require_root, netns_prefix) -> None:
    """What `calibration: auto` does, with the phone agent as the RSRP reader: sweep the cell's attenuation,
    read `signal` over the bus from the virtual phone's dumpsys, fit; the residual check must pass."""
    import json

    from cellab.contracts.attenuator import planning

    lab = load("cellab.labs", "virtual-android", "embedded lab")(prefix=netns_prefix)
    try:
        topo = lab.up()
        spec = lab.ue_agent_spec("ue0", 0, topo.ues[0])
        plan = planning()
        config = plan.virtual_lab_attenuator(str(tmp_path / "atten.pty"), 1)
        with lab_bus(tmp_path, {"ue0": AndroidUEAgent},
                     agent_kwargs={"ue0": {"serial": spec.args[1], "adb_port": int(spec.args[3])}}) as (controller, _), \
                CellControl(topo.extra["ctl"]) as cell:
            def set_db(channel: int, db: float) -> float:
                return float(cell.set_attenuation(channel - 1, db).get("attenuation_db", db))

            def read_rsrp() -> float:
                return controller.request("ue0", "signal")["rsrp_dbm"]

            fit = json.loads(plan.calibrate(config, set_db, read_rsrp, 1, 0.0, 60.0, 10.0, settle_s=0.3,
                                            samples=2, shield_box="vbox", ue="ue0", earfcn=3350))
        assert fit["b_db_per_db"] == pytest.approx(1.0, abs=0.05)  # 1 dB of attenuation, 1 dB of RSRP
        assert fit["residual_rms_db"] <= 1.5  # the fit's own acceptance check passed (it raises otherwise)
    finally:
        lab.down()
