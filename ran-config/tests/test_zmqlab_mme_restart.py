"""The MME restarted under a download on srsran-zmq (issue 41), on the real stack (extended tier: root, the srsRAN
bundle, and for Open5GS its bundle and cellab-ferretdb, else skipped saying why). srsEPC killed (or Open5GS's mmed)
5 s into a download and started again 2 s later: srsenb, told by the SCTP shim that its MME went away, sets S1 up
again with the new one (its own log's S1 Setup line, not a model's time); each UE comes back with a fresh attach,
and what the lab restarted for it is named in the run's events; the run is ok and its recovery row gives S1 back,
each UE attached and its first packet through the core, on the run's timeline and again on the stack's clock.
The 3-repeat campaign (none against the kill, `faults` as the factor) prints the recovery table. Every figure is
printed with the stack's speed: srsRAN over ZMQ runs in slow motion here, and its NAS timers count stack time."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

from .conftest import LOCK_WAIT_S, run_zmq_campaign, skip_without_open5gs

WORKLOAD_S = 100  # srsue's attach after srsEPC's Service Reject waits for T3410 + T3411 (25 s of stack time)
FIGURES = ("s1_back_s", "reattach_s", "traffic_back_s", "s1_back_stack_s", "reattach_stack_s", "traffic_back_stack_s")


def _campaign(core: str, daemon: str, repeat: int, levels: str) -> str:
    return (f"name: zmq-mme-{core}\nlab: srsran-zmq\nrepeat: {repeat}\norder: {{mode: sequential}}\n"
            f"factors: {{faults: [{levels}]}}\n"
            f"faults: {{kill: [{{kind: core_daemon, daemon: {daemon}, at_s: 5, duration_s: 2}}]}}\n"
            f"fixed: {{core: {core}, n_prb: 25, cc: cubic, sr_period_ms: 20}}\n"
            f"workload: {{tool: iperf3, duration_s: {WORKLOAD_S}}}\nmeasurements: [throughput, rtt]\n"
            "timeouts: {run_s: 300, request_s: 10}\nretry: {max_attempts: 1, backoff_s: 0}\n")


def _kill_run(run_dir: Path, daemon: str) -> dict:
    """One kill's recovery row, checked against the run's own events; printed with the stack's speed."""
    report = json.loads((run_dir / "faults.json").read_text())
    (row,) = report["recovery"]
    final = report["final_state"]
    t0 = json.loads((run_dir / "manifest.json").read_text())["workload_started_at"]
    events = [json.loads(line) for line in (run_dir / "lab_events.jsonl").read_text().splitlines()]
    named = {e["event"]: e for e in events}  # the last of each
    assert row["daemon"] == daemon and final["s1_up"] is True and final["not_back"] == [], (row, final)
    # S1 back at srsenb's own S1 Setup line, after the kill and the MME's start
    setup = [e for e in events if e["event"] == "s1_setup"]
    assert setup and setup[0]["source"] == "srsenb log", events
    assert row["s1_back_s"] == pytest.approx(setup[0]["t_s"] - t0, abs=1e-3) and row["s1_back_s"] > row["start_s"]
    # each UE attached afresh, then reached the server; what was restarted for it is named
    assert row["reattach_by"] == "attach" and row["s1_back_s"] < row["reattach_s"] <= row["traffic_back_s"], row
    recovery = final["s1_recovery"]
    restarted = [e for e in events if e["event"] == "radio_restart"]
    assert all(r["restarted"] == ["srsenb"] for r in restarted), restarted
    assert bool(restarted) == (recovery["attached_by_itself"] == []), (restarted, recovery)
    timing = json.loads((run_dir / "manifest.json").read_text()).get("lab_timing", {})
    speed = (timing.get("stack_clock") or {}).get("speed")
    print(f"{daemon} killed {row['start_s']:.2f} s, started again {row['end_s']:.2f} s; S1 back {row['s1_back_s']:.2f} s "
          f"({row.get('s1_back_stack_s')} stack s after the kill); UE attached {row['reattach_s']:.2f} s "
          f"({row.get('reattach_stack_s')} stack s), by itself: {recovery['attached_by_itself']}, restarted: "
          f"{[r['restarted'] for r in restarted]}; first packet {row['traffic_back_s']:.2f} s; stack speed {speed}; "
          f"stalls excused: {(timing.get('stack_clock') or {}).get('excused_stalls')}; events "
          f"{[(e['event'], round(e['t_s'] - t0, 2)) for e in events if e['event'] in named and 'ue' not in e]}")
    return row


@pytest.mark.root
@pytest.mark.extended  # one srsRAN run with the MME killed (about 3 min)
@pytest.mark.timeout(LOCK_WAIT_S + 900)
@pytest.mark.parametrize(("core", "daemon", "prefix"), [("srsepc", "srsepc", "zqe"), ("open5gs", "mme", "zqo")])
def test_the_mme_killed_under_a_download_s1_and_the_ue_come_back_and_the_run_is_ok(bundle, tmp_path, core, daemon,
                                                                                   prefix):
    if core == "open5gs":
        skip_without_open5gs()
    folder, runs, log = run_zmq_campaign(bundle, tmp_path, _campaign(core, daemon, 1, "kill"), prefix, LOCK_WAIT_S)
    ((run_id, status, error, _),) = runs
    assert status == "ok", (error, log)
    _kill_run(folder / "runs" / run_id, daemon)


@pytest.mark.root
@pytest.mark.extended  # six srsRAN runs: none and the kill, 3 repeats each (about 15 min)
@pytest.mark.timeout(LOCK_WAIT_S + 1800)
def test_the_srsepc_kill_as_a_factor_over_three_repeats_gives_the_recovery_table(bundle, tmp_path):
    folder, runs, log = run_zmq_campaign(bundle, tmp_path, _campaign("srsepc", "srsepc", 3, "none, kill"), "zq3",
                                         LOCK_WAIT_S)
    levels = [json.loads(factors)["faults"] for *_, factors in runs]
    assert sorted(levels) == ["kill"] * 3 + ["none"] * 3, runs
    assert [status for _, status, _, _ in runs] == ["ok"] * 6, (runs, log)
    rows = [_kill_run(folder / "runs" / run_id, "srsepc") for run_id, *_, factors in runs
            if json.loads(factors)["faults"] == "kill"]
    print("recovery table (srsEPC killed at 5 s, 3 repeats), s from the workload's start | stack s from the kill:")
    for name in FIGURES:
        values = [r[name] for r in rows]
        print(f"  {name:22s} " + "  ".join(f"{v:7.2f}" for v in values) + f"   median {statistics.median(values):.2f}")
