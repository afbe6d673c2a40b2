"""An inventory whose Android UEs are virtual phones (the virtual-android lab's, behind the fake adb server,
driven by the Android agent through the real adb client): a campaign prepares each phone before its first run
(Wi-Fi off, mobile data on) and refuses, before any run, a phone whose serial is not the one its entry names."""

from __future__ import annotations

import shutil
import textwrap

import pytest
import yaml

from cellab.contracts.registry import load
from cellab.testkit.helpers import free_port, run_cellab, start_agent, write_lab

pytestmark = [
    pytest.mark.skipif(shutil.which("adb") is None, reason="needs Debian's adb client (make setup)"),
    # beside other tests: what is checked is which phone is which and their settings, nothing timed; no BPF
    # module (cubic); the bench lease is the test's own (_inventory)
    pytest.mark.shares_cpu,
]


@pytest.fixture
def phones(require_root, netns_prefix, tmp_path):
    lab = load("cellab.labs", "virtual-android", "embedded lab")(prefix=netns_prefix, ues=2)
    procs = []
    try:
        topo = lab.up()
        port, telemetry_port = free_port(), free_port()
        path = write_lab(tmp_path, port, telemetry_port, ues=2)
        procs.append(start_agent(tmp_path, "server1", "server", topo.server.netns, port, telemetry_port))
        for i, serial in enumerate(topo.extra["phones"]):
            procs.append(start_agent(tmp_path, f"ue{i + 1}", "ue", None, port, telemetry_port, "--kind", "android",
                                     "--serial", serial, "--adb-port", str(topo.extra["adb_port"])))
        yield path, topo, lab
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(15)
        lab.down()


def _inventory(path, serials, models=None):
    data = yaml.safe_load(path.read_text())
    data["name"] = f"phones-{path.parent.name}"[:60]  # a bench lease of its own: other tests run beside this one
    for ue, serial, model in zip(data["devices"]["ues"], serials, models or [""] * len(serials), strict=True):
        ue["kind"], ue["serial"], ue["model"] = "android", serial, model
    data["devices"]["servers"][0]["address"] = "10.200.0.1"
    path.write_text(yaml.safe_dump(data))


def test_a_swapped_serial_fails_before_the_first_run_and_phones_are_prepared(phones, tmp_path):
    path, topo, lab = phones
    serials = topo.extra["phones"]
    campaign = tmp_path / "c.yaml"
    campaign.write_text(textwrap.dedent("""
        name: phones
        lab: lab.yaml
        workload: {tool: iperf3, duration_s: 1}  # what is checked is before and after the run
        timeouts: {run_s: 60, request_s: 20}
        retry: {max_late_tti_fraction: null}  # a functional test: a stalled cell must not fail it
    """))
    _inventory(path, list(reversed(serials)))
    done = run_cellab("run", str(campaign), "--out", str(tmp_path / "swapped"), "--no-report", timeout_s=180)
    said = " ".join((done.stdout + done.stderr).split())
    assert done.returncode == 2 and f"is phone {serials[1]}, but its agent ue1 drives phone {serials[0]}" in said, said
    assert not list((tmp_path / "swapped").glob("*/runs/*/manifest.json"))  # no run started

    phone = lab.adb_server.phones[serials[0]]
    models = [lab.adb_server.phones[s].describe()["model"] for s in serials]
    _inventory(path, serials, ["Nokia 3310", models[1]])  # the right serials, a model that is not the phone's
    done = run_cellab("run", str(campaign), "--out", str(tmp_path / "model"), "--no-report", timeout_s=180)
    said = " ".join((done.stdout + done.stderr).split())
    assert done.returncode == 2 and f"is a Nokia 3310, but phone {serials[0]} is a {models[0]}" in said, said

    phone.state.wifi, phone.state.mobile_data = True, False  # left on Wi-Fi: the campaign turns the cell's path on
    _inventory(path, serials, models)
    done = run_cellab("run", str(campaign), "--out", str(tmp_path / "ok"), "--no-report", timeout_s=240)
    assert done.returncode == 0, done.stdout + done.stderr
    assert phone.state.wifi is False and phone.state.mobile_data is True
