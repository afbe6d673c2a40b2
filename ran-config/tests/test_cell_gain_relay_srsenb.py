"""srsENB's `cell_gain` as a lab inventory's attenuator (issue 26) against the REAL srsenb: an inventory whose eNB
agent runs the bundle's srsenb and whose core agent runs srsEPC, a real srsue attached through them (started here,
as the srsran-zmq lab starts it: ZMQ straight to srsenb's ports, its TUN in the UE's namespace) and `cellab run`
of a campaign whose attenuation goes through the cell-gain relay (cellab.attenuator.relay) to the eNB agent's
`cell_gain`. What srsenb did is read from the UE: srsue's RSRP against its fixed noise floor (srsue_proc: RSRP
60 dB at 0 dB), per run and schedule step, and at the session's close: first the relay's safe state (the box's
max_db), then srsenb stopped by the eNB agent's safe_state (srsue hears nothing: RSRP 0). A value past max_db is
refused before anything starts, naming it.

Extended tier (srsRAN, 44-49 s here): `make bench BENCH=extended`, or this file alone."""

from __future__ import annotations

import json
import math
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
import yaml

from cellab.bus.keys import generate_keypair
from cellab.labs import netns
from cellab.ran.srsenb_proc import READY_LINE
from cellab.ran.srsue_proc import REF_SNR_DB, TUN_NAME, SrsueProcess, UeSettings, find_srsue
from cellab.ran.uhd_args import SAMPLE_RATE_HZ
from cellab.ran.zmqlab_params import CORE_PROFILES, ENB_PROFILE, subscribers_csv
from cellab.testkit.helpers import free_port, pid_in_netns, start_agent, stop_agents

RSRP_AT_0_DB = 60.0  # srsue's RSRP over ZMQ at cell_gain 0 (srsue_proc's noise floor; measured 60/50/40 at 0/10/20)
MAX_DB = 25.0  # the box's span: at 25 dB srsue (SNR 5 dB) still holds the cell and reports RSRP
SERVER_ADDR, CORE_SIDE = "10.201.0.2", "10.201.0.1"
ATTACH_TIMEOUT_S = 90.0
RSRP_TOLERANCE_DB = 1.0


class RsrpLog:
    """srsue's metrics CSV tailed every 0.2 s: (wall time a row was first seen, rsrp). srsue writes a row a second
    and flushes every second, so a row is at most ~2 s older than its stamp."""

    def __init__(self, csv: Path):
        self.csv, self.rows = csv, []
        self._seen = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._tail, daemon=True)
        self._thread.start()

    def _tail(self) -> None:
        while not self._stop.wait(0.2):
            try:
                lines = self.csv.read_text(errors="replace").splitlines()
            except OSError:
                continue
            if not lines:
                continue
            header = lines[0].split(";")
            complete = [line.split(";") for line in lines[1:-1]]  # the last line may be half written
            for row in complete[self._seen:]:
                if len(row) == len(header) and "rsrp" in header:
                    try:
                        self.rows.append((time.time(), float(row[header.index("rsrp")])))
                    except ValueError:
                        pass
            self._seen = max(self._seen, len(complete))

    def between(self, start_s: float, end_s: float) -> list[float]:
        return [rsrp for t, rsrp in self.rows if start_s <= t <= end_s]

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(2)


def _start_ue_when_enb_is_up(console: Path, ue: SrsueProcess, ue_ns: str, failures: list[str]) -> None:
    """srsue once srsenb says it started (as the lab orders them), then its default route once it attached."""
    deadline = time.monotonic() + ATTACH_TIMEOUT_S
    while time.monotonic() < deadline:
        if console.exists() and READY_LINE in console.read_text(errors="replace"):
            break
        time.sleep(0.1)
    else:
        failures.append("srsenb never printed its ready line")
        return
    ue.start()
    while time.monotonic() < deadline:  # the route at once: the campaign's first workload follows the attach
        if ue.attached_ip():
            subprocess.run(netns.in_netns(ue_ns, ["ip", "route", "replace", "default", "dev", TUN_NAME]),
                           check=True, capture_output=True)
            return
        if not ue.running():
            break
        time.sleep(0.05)
    failures.append(f"srsue did not attach: {ue.error_line() or ue.console_text()[-500:]}")


def _inventory(tmp_path: Path, port: int, telemetry_port: int) -> dict:
    agents = {"server1": "server", "ue1": "ue", "enb1": "enb", "core1": "core"}
    for name in ["controller", *agents]:
        generate_keypair(tmp_path / "keys", name)
    profile = yaml.safe_load(ENB_PROFILE.read_text())
    profile["rf"]["device"]["base_srate_hz"] = SAMPLE_RATE_HZ[25]  # the cell's own rate, as the srsran-zmq lab
    (tmp_path / "enb.yaml").write_text(yaml.safe_dump(profile, sort_keys=False))
    (tmp_path / "core.yaml").write_text(CORE_PROFILES["srsepc"].read_text())
    (tmp_path / "subscribers.csv").write_text(subscribers_csv(1))
    return {
        "name": f"relay-srsenb-{port}",
        "controller": {"bind": f"tcp://127.0.0.1:{port}", "telemetry_bind": f"tcp://127.0.0.1:{telemetry_port}",
                       "secret_key": "keys/controller.key_secret"},
        "hosts": [{"name": "box", "address": "127.0.0.1"}],
        "agents": [{"name": n, "role": r, "host": "box", "public_key": f"keys/{n}.key"} for n, r in agents.items()],
        "devices": {
            "servers": [{"name": "edge", "agent": "server1", "address": SERVER_ADDR}],
            "ues": [{"name": "srsue", "kind": "virtual", "agent": "ue1",
                     "attenuator": {"attenuator": "enb-gain", "channel": 1}}],
            "enb": [{"name": "enb", "agent": "enb1", "rf": "zmq", "profile": "enb.yaml"}],
            "core": [{"name": "epc", "flavour": "srsepc", "agent": "core1", "profile": "core.yaml",
                      "subscribers": "subscribers.csv"}],
            "attenuators": [{"name": "enb-gain", "model": "srsenb-cell-gain", "transport": "enb-agent",
                             "address": "enb1", "channels": 1, "min_db": 0, "max_db": MAX_DB, "step_db": 0.5,
                             "agent": "enb1"}],
        },
    }


CAMPAIGN = """
    name: cell-gain-srsenb
    lab: lab.yaml
    factors: {schedule: [walk, static]}  # the static run last: its 5 dB held until the session closes
    fixed: {attenuation_db: 5.2}
    schedules: {walk: {file: walk.yaml}}
    workload: {duration_s: 8, ping_interval_ms: null}
    timeouts: {run_s: 90, request_s: 20}
    retry: {max_attempts: 1, backoff_s: 0}
"""


@pytest.mark.root
@pytest.mark.extended  # srsenb, srsEPC and srsue for most of a minute; the relay's path: test_cell_gain_relay
@pytest.mark.timeout(900 + 400)  # the srsRAN lock may be held by another stack for minutes
def test_srsenb_cell_gain_relay_moves_the_real_ues_rsrp_and_ends_at_max_db(bundle, srsran_lock, netns_prefix,
                                                                         tmp_path):
    port, telemetry_port = free_port(), free_port()
    inventory = _inventory(tmp_path, port, telemetry_port)
    (tmp_path / "lab.yaml").write_text(yaml.safe_dump(inventory))
    (tmp_path / "walk.yaml").write_text("channels: [1]\nsegments: [{kind: steps, values_db: [10, 20], dwell_s: 4}]\n")
    (tmp_path / "campaign.yaml").write_text(textwrap.dedent(CAMPAIGN))
    # past the box's max_db: refused before anything starts, naming the field and the limit
    (tmp_path / "bad.yaml").write_text(textwrap.dedent(CAMPAIGN).replace("attenuation_db: 5.2", "attenuation_db: 30"))
    said = subprocess.run([sys.executable, "-m", "cellab", "validate", str(tmp_path / "bad.yaml")],
                          capture_output=True, text=True)
    assert said.returncode == 2 and "fixed.attenuation_db" in said.stderr and "25" in said.stderr, said.stderr

    core_ns, ue_ns, srv_ns = f"{netns_prefix}-core", f"{netns_prefix}-ue0", f"{netns_prefix}-srv"
    agents: dict[str, subprocess.Popen] = {}
    ue = SrsueProcess(find_srsue(bundle), tmp_path / "srsue", UeSettings(n_prb=25, base_srate_hz=SAMPLE_RATE_HZ[25]),
                      netns=core_ns, ue_netns=ue_ns, index=0, ports=(2000, 2001))
    rsrp = RsrpLog(ue.metrics)
    failures: list[str] = []
    try:
        for name in (core_ns, ue_ns, srv_ns):
            netns.create(name)
        netns.veth(core_ns, "srv0", srv_ns, "eth0")
        netns.address(core_ns, "srv0", f"{CORE_SIDE}/24")
        netns.address(srv_ns, "eth0", f"{SERVER_ADDR}/24")
        netns.default_route(srv_ns, CORE_SIDE)
        netns.sysctl(core_ns, "net.ipv4.ip_forward", "1")
        srsran = ("--srsran-bin", str(bundle))
        for name, role, ns, extra in (("server1", "server", srv_ns, ()), ("ue1", "ue", ue_ns, ()),
                                      ("enb1", "enb", core_ns, srsran), ("core1", "core", core_ns, srsran)):
            agents[name] = start_agent(tmp_path, name, role, ns, port, telemetry_port, *extra)
        starter = threading.Thread(target=_start_ue_when_enb_is_up, daemon=True,
                                   args=(tmp_path / "artifacts-enb1" / "srsenb_console.log", ue, ue_ns, failures))
        starter.start()
        out = tmp_path / "out"
        started = time.time()
        result = subprocess.run([sys.executable, "-m", "cellab", "run", str(tmp_path / "campaign.yaml"), "--out",
                                 str(out), "--no-report"], capture_output=True, text=True, timeout=400)
        closed = time.time()
        assert result.returncode == 0, (failures, result.stdout[-3000:] + result.stderr[-3000:])
        time.sleep(3.0)  # srsue's rows after the close (written a second apart)
        after_close = rsrp.between(closed + 1.5, time.time())
        enb_on_air_after_close = pid_in_netns(core_ns, "srsenb") is not None
    finally:
        rsrp.stop()
        ue.stop(grace_s=1.0)
        stop_agents(agents)
        for name in (ue_ns, srv_ns, core_ns):
            netns.remove(name)
    (folder,) = list(out.iterdir())
    with sqlite3.connect(folder / "results.sqlite") as db:
        rows = db.execute("SELECT run_id, status, error, factors FROM runs ORDER BY started_at").fetchall()
    assert [r[1] for r in rows] == ["ok"] * 2, rows
    levels: dict[str, float] = {}
    last_run_end = 0.0
    for run_id, _, _, factors in rows:
        manifest = json.loads((folder / "runs" / run_id / "manifest.json").read_text())
        t0, t_end = manifest["workload_started_at"], manifest["workload_finished_at"]
        last_run_end = max(last_run_end, t_end)
        if json.loads(factors)["schedule"] == "static":
            assert manifest["attenuation_applied_db"] == {"1": 5.0}  # 5.2 on the box's 0.5 dB grid
            levels["5"] = _median(rsrp.between(t0 + 2.5, t_end), "5 dB")
        else:
            played = [json.loads(x) for x in (folder / "runs" / run_id / "attenuation.jsonl").read_text().splitlines()]
            assert [p["db"] for p in played if "planned_s" in p] == [10.0, 20.0]
            levels["10"] = _median(rsrp.between(t0 + 2.5, t0 + 4.0), "10 dB")
            levels["20"] = _median(rsrp.between(t0 + 6.5, t_end), "20 dB")
    # the close: the relay's max_db first (the last RSRP srsue heard), then srsenb stopped (srsue hears nothing)
    heard = [r for r in rsrp.between(last_run_end, closed + 1.0) if r > 0]
    assert heard, ("no RSRP between the last run and the close", rsrp.rows)
    levels["25 (safe state)"] = heard[-1]
    print("RSRP around the close (s from cellab run's exit, dB):", [(round(t - closed, 1), r) for t, r in rsrp.rows
                                                                    if t > closed - 8])
    assert not enb_on_air_after_close and after_close and max(after_close) == 0.0, (enb_on_air_after_close,
                                                                                     after_close)
    print(f"srsue RSRP per attenuation (dB): {levels}; {len(rsrp.rows)} samples over {closed - started:.0f} s; "
          f"srsenb still running after the session closed: {enb_on_air_after_close}")
    for label, value in levels.items():
        wanted = expected_rsrp_db(float(label.split()[0]))
        assert abs(value - wanted) <= RSRP_TOLERANCE_DB, (label, value, wanted, levels, rsrp.rows)


def expected_rsrp_db(attenuation_db: float) -> float:
    """srsue's RSRP at this attenuation: the cell's reference signal plus its own noise floor, which the estimate
    takes in (REF_SNR_DB below the signal at 0 dB: +1.2 dB at 25 dB, SNR 5 dB)."""
    signal, noise = RSRP_AT_0_DB - attenuation_db, RSRP_AT_0_DB - REF_SNR_DB
    return 10 * math.log10(10 ** (signal / 10) + 10 ** (noise / 10))


def _median(values: list[float], what: str) -> float:
    assert values, f"srsue reported no RSRP at {what}"
    return sorted(values)[len(values) // 2]
