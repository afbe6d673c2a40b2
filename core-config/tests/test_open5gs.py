"""Open5GS 2.7.7 (the shared bundle ../shared/tools/open5gs, unmodified) run by the core agent on OUR rendered
files inside a network namespace: the run's own FerretDB (db_local), the subscribers provisioned in Open5GS's
schema, the UPF's TUN, the MME on the bundle's one-to-one SCTP shim; then the srsRAN bundle's zmq-example
srsenb (its own SCTP shim: same wire format) and srsue whose IMSI is NOT provisioned: the agent's status names
that IMSI with the HSS's / MME's own line, and the UE does not attach. (Two UEs attaching through Open5GS and
carrying traffic: ran-config/tests/test_zmqlab_open5gs.py.) Holds /tmp/cellab-srsran.lock."""

from __future__ import annotations

import configparser
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from cellab.bus.testing import lab_bus
from cellab.contracts.core import ConfigureParams, CoreClient, StartParams
from cellab.epc.agent import OPEN5GS_BUNDLE, UPF_TUN, CoreAgent
from cellab.labs.proc import ManagedProcess, stop_all

from .conftest import EXAMPLES, srsran_lock

SRSRAN = Path(__file__).resolve().parents[3] / "shared/tools/srsran"
ATTACH_WAIT_S = 90  # srsue at 23.04 Msps (the zmq-example) may search the cell for long on a busy host
UNKNOWN_FOR_THE_HSS = "001010000000777"  # the one subscriber provisioned; the UE's own IMSI is not


def _usim(ue_conf: Path) -> dict[str, str]:
    ini = configparser.ConfigParser(inline_comment_prefixes=("#", ";"), strict=False)
    ini.read(ue_conf)
    return {k: ini["usim"][k].strip() for k in ("imsi", "k", "opc")}


def _wait(check, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.5)
    return False


# ---- without Open5GS -----------------------------------------------------------------------------
def test_render_for_an_open5gs_outside_the_packages(tmp_path):
    from cellab.epc.profile import load_profile
    from cellab.epc.render import render

    prefix = tmp_path / "o5"
    profile = load_profile(EXAMPLES / "srsran-zmq-open5gs.yaml")
    files = {f.relative_to(tmp_path / "out").as_posix() for f in render(profile, "open5gs", tmp_path / "out",
                                                                         open5gs_prefix=prefix)}
    assert {f"freeDiameter/{d}.conf" for d in ("mme", "hss", "smf", "pcrf")} <= files
    mme_yaml = (tmp_path / "out/mme.yaml").read_text()
    assert f"freeDiameter: {(tmp_path / 'out/freeDiameter/mme.conf').resolve()}" in mme_yaml
    for daemon, peer in (("mme", "hss"), ("hss", "mme"), ("smf", "pcrf"), ("pcrf", "smf")):
        conf = (tmp_path / f"out/freeDiameter/{daemon}.conf").read_text()
        assert "No_SCTP;" in conf and f'ConnectPeer = "{peer}.localdomain"' in conf, conf
        assert f'LoadExtension = "{prefix}/lib/freeDiameter/dict_dcca_3gpp.fdx";' in conf, conf


def test_db_local_needs_one_loopback_host():
    from pydantic import ValidationError

    from cellab.epc.profile import CoreProfile

    base = {"name": "x", "plmn": {"mcc": "001", "mnc": "01"}, "tacs": [7], "db_local": True}
    assert CoreProfile.model_validate(base | {"db_uri": "mongodb://localhost:27018/open5gs"}).db_local
    with pytest.raises(ValidationError) as err:
        CoreProfile.model_validate(base | {"db_uri": "mongodb://10.0.0.5:27017/open5gs"})
    assert "db_local" in str(err.value) and "loopback" in str(err.value)


def test_the_mme_gets_open5gs_own_shim_and_the_others_none(tmp_path, monkeypatch):
    from cellab.epc import agent as agent_mod
    from cellab.epc.daemons import Daemon, classify, version_of

    monkeypatch.setattr(agent_mod, "kernel_has_sctp", lambda: False)
    core = CoreAgent.__new__(CoreAgent)
    core.env, core._flavour, core._o5_prefix = {"LD_PRELOAD": "/srsran/lib/sctpshim.so", "X": "1"}, "open5gs", tmp_path
    mme, hss = Daemon("mme", "open5gs-mmed", "mme.yaml", "-c"), Daemon("hss", "open5gs-hssd", "hss.yaml", "-c")
    assert core._env_for(mme) == {"X": "1", "LD_PRELOAD": str(tmp_path / "lib/sctp1to1shim.so")}
    assert core._env_for(hss) == {"X": "1"}
    core._flavour = "srsepc"
    assert core._env_for(Daemon("epc", "srsepc", "epc.conf", ""))["LD_PRELOAD"] == "/srsran/lib/sctpshim.so"
    assert version_of("11/26 05:00:48.1: [app] INFO: Open5GS daemon v2.7.7 (../src/main.c:1)", "open5gs") == \
        "Open5GS v2.7.7"
    assert version_of("Built in Release mode using 23.04.0.", "srsepc") == "srsEPC 23.04.0"
    info = "[dbi] INFO: MongoDB URI: 'mongodb://127.0.0.1:27017/open5gs' (../src/lib/dbi/ogs-mongoc.c:130)"
    assert classify(info) is None  # naming ogs-mongoc.c is no database error
    assert classify("[dbi] WARNING: Failed to connect to server [mongodb://127.0.0.1:27017/open5gs]") == "db_error"
    assert classify("[dbi] INFO: [imsi-001010123456780] Cannot find IMSI in DB (subscription.c:63)") == \
        "imsi_unknown"
    assert classify("[emm] WARNING: Authentication failure(MAC failure) (../src/src/mme/emm-sm.c:1148)") == \
        "auth_failure"
    assert classify("[emm] WARNING: Authentication failure(SYNCH failure) (emm-sm.c:1150)") == "sqn_error"


WRONG_K = "0f0e0d0c0b0a09080706050403020100"  # a public test value, not the UE's


@pytest.mark.cpu_heavy  # a whole EPC and srsRAN stack: alone on the host
@pytest.mark.timeout(900)  # the srsRAN lock may be held by another stack for minutes
# auth_failure in make bench BENCH=extended: make test classifies the MME's own MAC-failure line above
@pytest.mark.parametrize("case", ["imsi_unknown", pytest.param("auth_failure", marks=pytest.mark.extended)])
def test_a_ue_open5gs_refuses_is_named_with_its_own_line(require_root, netns_prefix, tmp_path, case):
    """imsi_unknown: the UE's IMSI not provisioned (another one is); auth_failure: provisioned with another K."""
    if not (OPEN5GS_BUNDLE / "bin/open5gs-mmed").is_file():
        pytest.skip(f"the Open5GS bundle is absent ({OPEN5GS_BUNDLE})")
    if not (SRSRAN / "bin/srsenb").is_file():
        pytest.skip(f"the srsRAN bundle is absent ({SRSRAN})")
    from cellab.paths import find_program

    try:
        find_program("cellab-ferretdb")
    except Exception as exc:  # noqa: BLE001
        pytest.skip(f"cellab-ferretdb not built ({exc}); `make build` builds it")
    ran = tmp_path / "ran"
    ran.mkdir()
    for name in ("enb.conf", "ue.conf", "rr.conf", "sib.conf", "rb.conf"):
        shutil.copy(SRSRAN / "etc/zmq-example" / name, ran / name)
    usim = _usim(ran / "ue.conf")
    imsi, k = (UNKNOWN_FOR_THE_HSS, usim["k"]) if case == "imsi_unknown" else (usim["imsi"], WRONG_K)
    subscribers = f"name,imsi,k,opc,amf,apn,qci\nother,{imsi},{k},{usim['opc']},8000,srsapn,9\n"
    ns, ue_ns = f"{netns_prefix}o5", f"{netns_prefix}o5ue"
    shim = str(SRSRAN / "lib/sctpshim.so")
    procs: list[ManagedProcess] = []
    with srsran_lock():
        for name in (ns, ue_ns):
            subprocess.run(["ip", "netns", "add", name], check=True)
        subprocess.run(["ip", "-n", ns, "link", "set", "lo", "up"], check=True)
        # as the srsran-zmq lab starts it: the srsRAN shim in the agent's environment (for srsEPC); the agent
        # gives Open5GS's MME its own one-to-one shim instead and the other daemons none
        kwargs = {"core1": {"netns": ns, "env": {"LD_PRELOAD": shim}}}
        try:
            with lab_bus(tmp_path, {"core1": CoreAgent}, agent_kwargs=kwargs) as (ctl, agents):
                core = CoreClient(ctl, "core1", timeout_s=30)
                conf = core.configure(ConfigureParams(
                    profile_yaml=(EXAMPLES / "srsran-zmq-open5gs.yaml").read_text(), subscribers_csv=subscribers))
                run_dir = agents["core1"].artifact_dir / conf.run_dir
                assert conf.daemons == ["db", "hss", "pcrf", "sgwc", "sgwu", "upf", "smf", "mme"], conf.daemons
                assert "config/freeDiameter/mme.conf" in conf.files
                try:
                    t0 = time.monotonic()
                    status = core.start(StartParams(settle_s=3))
                    start_s = time.monotonic() - t0
                    assert status.ok, status.problems
                    assert status.version == "Open5GS v2.7.7", status.version
                    ports = {d.name: d.ports for d in status.daemons}
                    assert all(ports["hss"].values()) and all(ports["mme"].values()), ports
                    tun = subprocess.run(["ip", "-n", ns, "-4", "addr", "show", UPF_TUN], capture_output=True,
                                         text=True, check=False).stdout
                    assert "172.16.0.1/24" in tun, tun
                    procs.append(ManagedProcess(
                        ["env", f"LD_PRELOAD={shim}", str(SRSRAN / "bin/srsenb"), str(ran / "enb.conf"),
                         f"--enb_files.sib_config={ran / 'sib.conf'}", f"--enb_files.rr_config={ran / 'rr.conf'}",
                         f"--enb_files.rb_config={ran / 'rb.conf'}", f"--log.filename={ran / 'enb.log'}"],
                        ran / "enb.out", netns=ns, cwd=ran))
                    mme_log = run_dir / "logs/mme.log"
                    assert _wait(lambda: "eNB-S1 accepted" in mme_log.read_text(errors="replace"), 20), \
                        (ran / "enb.out").read_text(errors="replace")[-600:]
                    procs.append(ManagedProcess([str(SRSRAN / "bin/srsue"), str(ran / "ue.conf"),
                                                 f"--gw.netns={ue_ns}", f"--log.filename={ran / 'ue.log'}"],
                                                ran / "ue.out", netns=ns, cwd=ran))
                    found = _wait(lambda: any(f.kind == case for f in core.status().findings), ATTACH_WAIT_S)
                    status = core.status()
                    assert found, (status, (ran / "ue.out").read_text(errors="replace")[-600:])
                    unknown = [f for f in status.findings if f.kind == case]
                    assert all(f.daemon in ("hss", "mme") for f in unknown), unknown
                    assert any(usim["imsi"] in f.line for f in unknown), unknown  # the IMSI, in Open5GS's words
                    assert not status.ok and any(usim["imsi"] in p and case in p for p in status.problems), \
                        status.problems
                    assert "Network attach successful" not in (ran / "ue.out").read_text(errors="replace")
                    print(f"Open5GS started in {start_s:.1f} s; findings: {[f.line for f in unknown]}")
                finally:
                    stop_all(procs, grace_s=5)
                    core.stop()
            gone = subprocess.run(["ip", "-n", ns, "link", "show", UPF_TUN], capture_output=True, check=False)
            assert gone.returncode != 0, "the agent left its TUN behind"
            for artifact in run_dir.rglob("*"):  # K and OPc are in the database only, outside the artifacts
                if artifact.is_file():
                    text = artifact.read_text(errors="replace").lower()
                    assert usim["k"].lower() not in text and usim["opc"].lower() not in text, artifact
                    assert WRONG_K not in text, artifact
        finally:
            for name in (ue_ns, ns):
                subprocess.run(["ip", "netns", "del", name], check=False)
