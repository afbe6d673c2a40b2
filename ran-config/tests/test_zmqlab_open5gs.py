"""The srsran-zmq lab on Open5GS (`core: open5gs`): one `cellab run` whose two srsue attach through Open5GS 2.7's
MME (the shared bundle ../shared/tools/open5gs, run by the core agent on the core room's files, with the
subscribers it provisioned into the run's FerretDB) and both carry traffic; the run's record names the core and
its version. Skipped, saying so, without the Open5GS or srsRAN bundle or cellab-ferretdb."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cellab.ran.srsue_proc import ue_usim
from cellab.ran.uhd_args import SAMPLE_RATE_HZ
from cellab.ran.zmqlab import CORE_ENV, default_core, validate_params

from cellab.errors import CellabError

OPEN5GS = Path(__file__).resolve().parents[2].parent / "shared" / "tools" / "open5gs"


# ---- without srsRAN ------------------------------------------------------------------------------
def test_core_is_a_run_parameter_and_a_bad_one_names_the_allowed(monkeypatch):
    assert validate_params({"core": "srsepc"}).core == "srsepc" and validate_params({}).core is None
    with pytest.raises(CellabError) as err:
        validate_params({"core": "nextepc"}, "camp.yaml")
    assert "camp.yaml" in str(err.value) and "core" in str(err.value) and "open5gs" in str(err.value)
    monkeypatch.setenv(CORE_ENV, "srsepc")
    assert default_core() == "srsepc"
    monkeypatch.setenv(CORE_ENV, "open5gs-2.6")
    with pytest.raises(CellabError) as err:
        default_core()
    assert CORE_ENV in str(err.value) and "open5gs, srsepc" in str(err.value), str(err.value)


def test_without_open5gs_the_default_core_is_srsepc(monkeypatch, tmp_path):
    monkeypatch.delenv(CORE_ENV, raising=False)
    monkeypatch.setenv("CELLAB_OPEN5GS_DIR", str(tmp_path))  # no bin/open5gs-mmed there
    assert default_core() == "srsepc"


def _runs(folder: Path) -> list[tuple[str, str, str]]:
    with sqlite3.connect(folder / "results.sqlite") as db:
        return db.execute("SELECT run_id, status, COALESCE(error, '') FROM runs ORDER BY idx").fetchall()


@pytest.mark.root
@pytest.mark.timeout(900 + 300)  # the srsRAN lock may be held by another stack for minutes; the run ~90 s
# two srsRAN UEs (40 s): make test runs the lab on Open5GS, its default core, with one UE in
# test_sr_receptions_zmq.py (the run's record naming Open5GS and its version)
@pytest.mark.extended
def test_two_ues_attach_through_open5gs_and_carry_traffic(bundle, tmp_path):
    if not (OPEN5GS / "bin" / "open5gs-mmed").is_file():
        pytest.skip(f"Open5GS bundle absent: no {OPEN5GS / 'bin/open5gs-mmed'} (../shared/tools/open5gs)")
    from cellab.paths import find_program

    try:
        find_program("cellab-ferretdb")
    except Exception as exc:  # noqa: BLE001
        pytest.skip(f"cellab-ferretdb not built ({exc}); `make build` builds it")
    out, camp = tmp_path / "out", tmp_path / "camp.yaml"
    camp.write_text("name: zmq-open5gs\nlab: srsran-zmq\nrepeat: 1\n"
                    "fixed: {core: open5gs, n_prb: 25, cc: cubic, ues: 2, sr_period_ms: 20}\n"
                    "workload: {tool: iperf3, duration_s: 3}\n"
                    "timeouts: {run_s: 120, request_s: 6}\n"
                    "retry: {max_attempts: 1, backoff_s: 0, min_stack_speed: null}\n")  # the test judges the speed
    env = os.environ | {"CELLAB_SRSRAN_BIN": str(bundle), "CELLAB_SRSRAN_LOCK_TIMEOUT_S": "60",
                        "CELLAB_ZMQ_CORE": "srsepc"}  # the run's `core` wins over the lab's default
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "cellab", "run", str(camp), "--out", str(out), "--prefix", "zqo",
                           "--no-report"], capture_output=True, text=True, timeout=400, env=env)
    took_s = time.monotonic() - t0
    log = proc.stdout[-3000:] + proc.stderr[-3000:]
    [folder] = sorted(out.iterdir())
    [(run_id, status, error)] = _runs(folder)
    assert status == "ok", (error, log)
    run_dir = folder / "runs" / run_id
    lab = json.loads((run_dir / "lab_status.json").read_text())
    core = lab["core"]
    assert core["flavour"] == "open5gs" and core["version"] == "Open5GS v2.7.7" and core["ok"], core
    assert core["core"] == {"flavour": "open5gs", "version": "Open5GS v2.7.7"}
    assert {d["name"] for d in core["daemons"] if d["running"]} == {"db", "hss", "pcrf", "sgwc", "sgwu", "upf",
                                                                    "smf", "mme"}, core["daemons"]
    # both UEs attached through Open5GS's MME, with the subscribers the core room provisioned (their IMSIs in
    # the MME's own attach lines)
    attached = " ".join(f["line"] for f in core["findings"] if f["kind"] == "attach_ok" and f["daemon"] == "mme")
    assert all(ue_usim(i)["imsi"] in attached for i in (0, 1)), core["findings"]
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["ground_truth"]["core"] == {"flavour": "open5gs", "version": "Open5GS v2.7.7"}, manifest
    # both carried traffic; over ZMQ the stack runs in slow motion when the host cannot keep up, so the bar is
    # the stack's own speed's: the lab's measure over the run (the broker's dl_msps against the cell's rate),
    # recorded for the runner's min_stack_speed rule
    rates = {ue: json.loads((run_dir / "ues" / ue / "metrics.json").read_text())["throughput_bps"] / 1e6
             for ue in ("ue0", "ue1")}
    timing = manifest["lab_timing"]
    speed = timing["stack_speed"]
    assert timing["nominal_msps"] == SAMPLE_RATE_HZ[25] / 1e6 and timing["stack_samples"] >= 1, timing
    assert 0.05 < speed <= 1.1 and timing["stack_speed_min"] <= speed, timing
    assert all(r > (2.0 if speed >= 0.9 else 0.25) for r in rates.values()), (rates, f"stack speed {speed:.2f}")
    print(f"open5gs: attach of 2 UEs {lab['configure']['attach_s']:.1f} s, Mbit/s {rates} at stack speed "
          f"{speed:.2f}, cellab run {took_s:.0f} s")


@pytest.mark.root
@pytest.mark.extended  # srsRAN again; make test names an unknown IMSI through Open5GS in core-config's test_open5gs
@pytest.mark.timeout(900 + 300)
def test_a_ue_open5gs_does_not_know_fails_naming_its_imsi_and_the_hss_line(bundle, monkeypatch):
    """The lab's session up on Open5GS with 2 UEs provisioned, then UE 1's subscriber removed from the core's
    database (`cellab core subscribers remove`, in the core's namespace): configure fails at once (not after the
    attach timeout) naming UE 1's IMSI and the HSS's own line."""
    if not (OPEN5GS / "bin" / "open5gs-mmed").is_file():
        pytest.skip(f"Open5GS bundle absent: no {OPEN5GS / 'bin/open5gs-mmed'} (../shared/tools/open5gs)")
    from cellab.labs.netns import in_netns
    from cellab.paths import find_program
    from cellab.run.session import LabSession

    try:
        find_program("cellab-ferretdb")
    except Exception as exc:  # noqa: BLE001
        pytest.skip(f"cellab-ferretdb not built ({exc}); `make build` builds it")
    monkeypatch.setenv("CELLAB_SRSRAN_BIN", str(bundle))
    monkeypatch.setenv(CORE_ENV, "open5gs")
    imsi = ue_usim(1)["imsi"]
    with LabSession("srsran-zmq", prefix="zqn", ue_count=2, purpose="test") as session:
        lab = session.lab
        assert lab.core_flavour == "open5gs" and lab.core_version == "Open5GS v2.7.7"
        removed = subprocess.run(in_netns(lab.core_ns, [
            sys.executable, "-m", "cellab", "core", "subscribers", "remove", imsi, "--db",
            "mongodb://127.0.0.1:27017/open5gs", "--flavour", "open5gs"]), capture_output=True, text=True, timeout=60)
        assert removed.returncode == 0, removed.stdout + removed.stderr
        t0 = time.monotonic()
        with pytest.raises(CellabError) as err:
            lab.configure({"n_prb": 25, "sr_period_ms": 20})
        took_s = time.monotonic() - t0
    text = str(err.value)
    assert f"UE 1 (IMSI {imsi})" in text and "hss:" in text and "Cannot find IMSI in DB" in text, text
    assert ue_usim(0)["imsi"] not in text, text  # UE 0 is known: not blamed
    assert took_s < 45, f"{took_s:.0f} s: the refusal should end the wait, not the attach timeout"
    print(f"refused in {took_s:.1f} s: {text}")
