"""srsEPC (the shared srsRAN bundle) run by the core agent on OUR epc.conf and user_db.csv, with the bundle's
zmq-example eNB and UE: the UE attaches. Holds /tmp/cellab-srsran.lock (one srsRAN stack per machine)."""

from __future__ import annotations

import configparser
import fcntl
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from cellab.bus.testing import lab_bus
from cellab.contracts.core import ConfigureParams, CoreClient, StartParams
from cellab.epc.agent import CoreAgent
from cellab.proc import ManagedProcess

from .conftest import EXAMPLES

BUNDLE = Path(__file__).resolve().parents[3] / "shared/tools/srsran"
LOCK = Path("/tmp/cellab-srsran.lock")
ATTACH_TIMEOUT_S = 90


def _usim(ue_conf: Path) -> dict[str, str]:
    ini = configparser.ConfigParser(inline_comment_prefixes=("#", ";"), strict=False)
    ini.read(ue_conf)
    return {k: ini["usim"][k].strip() for k in ("imsi", "k", "opc")}


def test_srsue_attaches_to_srsepc_on_our_config(require_root, tmp_path):
    if not (BUNDLE / "bin/srsepc").is_file():
        pytest.skip(f"the srsRAN bundle is absent ({BUNDLE})")
    lab = tmp_path / "lab"
    lab.mkdir()
    for name in ("enb.conf", "ue.conf", "rr.conf", "sib.conf", "rb.conf"):
        shutil.copy(BUNDLE / "etc/zmq-example" / name, lab / name)
    usim = _usim(lab / "ue.conf")
    subscribers = f"name,imsi,k,opc,amf,qci\nue1,{usim['imsi']},{usim['k']},{usim['opc']},8000,7\n"
    shim = {"LD_PRELOAD": str(BUNDLE / "lib/sctpshim.so")}
    procs: list[ManagedProcess] = []
    with open(LOCK, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        subprocess.run(["ip", "netns", "add", "ue1"], check=True)
        try:
            agent_kwargs = {"core1": {"programs": {"srsepc": str(BUNDLE / "bin/srsepc")}, "env": shim}}
            with lab_bus(tmp_path, {"core1": CoreAgent}, agent_kwargs=agent_kwargs) as (ctl, agents):
                core = CoreClient(ctl, "core1", timeout_s=30)
                conf = core.configure(ConfigureParams(profile_yaml=(EXAMPLES / "srsran-zmq.yaml").read_text(),
                                                      subscribers_csv=subscribers))
                run_dir = agents["core1"].artifact_dir / conf.run_dir
                epc_conf = configparser.ConfigParser()
                epc_conf.read(run_dir / "config/epc.conf")
                assert epc_conf["hss"]["db_file"] == str((run_dir / "config/user_db.csv").resolve())
                try:
                    status = core.start(StartParams(settle_s=3))
                    assert status.daemons[0].running, status.problems
                    procs.append(ManagedProcess(["env", f"LD_PRELOAD={shim['LD_PRELOAD']}",
                                                 str(BUNDLE / "bin/srsenb"), str(lab / "enb.conf"),
                                                 f"--enb_files.sib_config={lab / 'sib.conf'}",
                                                 f"--enb_files.rr_config={lab / 'rr.conf'}",
                                                 f"--enb_files.rb_config={lab / 'rb.conf'}",
                                                 f"--log.filename={lab / 'enb.log'}"], lab / "enb.out"))
                    time.sleep(3)
                    procs.append(ManagedProcess([str(BUNDLE / "bin/srsue"), str(lab / "ue.conf"),
                                                 f"--log.filename={lab / 'ue.log'}"], lab / "ue.out"))
                    deadline = time.monotonic() + ATTACH_TIMEOUT_S
                    out = ""
                    while time.monotonic() < deadline:
                        out = (lab / "ue.out").read_text(errors="replace")
                        if "Network attach successful" in out or not all(p.running() for p in procs):
                            break
                        time.sleep(0.5)
                    assert "Network attach successful" in out, (
                        f"ue: {out[-800:]}\nenb: {(lab / 'enb.out').read_text(errors='replace')[-800:]}")
                    status = core.status()
                    assert status.ok, status.problems
                finally:
                    for proc in reversed(procs):
                        proc.stop(grace_s=10)
                    core.stop()
                epc_log = (run_dir / "logs/epc.out").read_text(errors="replace")
                assert usim["k"].lower() not in epc_log.lower()
        finally:
            subprocess.run(["ip", "netns", "del", "ue1"], check=False)
