"""srsenb restarted inside a run on srsran-zmq (issue 28, `enb_restart`), on the real stack: srsenb SIGKILLed 3 s
into a download and started again by the eNB agent 3 s later, srsue and the broker kept running. The broker feeds
the UE silence while srsenb is gone (broker/zmq_broker.c), so srsue declares the radio link failure itself; once
the new srsenb is up srsue finds the cell, its re-establishment is rejected (the new srsenb has no context) and it
connects anew with a Service Request, which srsEPC accepts over the new srsenb's S1 Setup. Beside it a run
without a fault (the stack's speed). The stack's speed is read first: its timers run on its samples, so the times
below are wall-clock times of a stack in slow motion. Skipped, saying why, without the srsRAN bundle or root."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .conftest import LOCK_WAIT_S, run_zmq_campaign

MIN_STACK_SPEED = 0.2  # below it the host, not the stack, decides every time measured here


def _events(run_dir: Path, t0: float) -> dict[str, list[float]]:
    """The run's lab events (srsue's RRC events, the lab's and the broker's) by name, s from the workload's start."""
    out: dict[str, list[float]] = {}
    for line in (run_dir / "lab_events.jsonl").read_text().splitlines():
        row = json.loads(line)
        out.setdefault(row["event"], []).append(round(row["t_s"] - t0, 2))
    return out


def _ping_back(run_dir: Path, t0: float, after_s: float) -> float:
    """The workload's ping (every 200 ms, `ping -D`): its first answer after the longest silence after `after_s`."""
    answered = [float(line[1:].split("]", 1)[0]) - t0 for line in next(run_dir.glob("ues/*/*-ping.txt")).read_text()
                .splitlines() if line.startswith("[") and "bytes from" in line]
    gaps = [(b - a, b) for a, b in zip(answered, answered[1:], strict=False) if b >= after_s]
    return max(gaps)[1] if gaps else float("nan")


@pytest.mark.root
@pytest.mark.extended  # two srsRAN runs, one srsenb restart (about 1.5 min)
@pytest.mark.timeout(LOCK_WAIT_S + 700)
def test_srsenb_restarted_under_the_ue_and_the_ue_comes_back_by_itself(bundle, tmp_path):
    folder, runs, log = run_zmq_campaign(bundle, tmp_path, (
        "name: zmq-enb-restart\nlab: srsran-zmq\nrepeat: 1\norder: {mode: sequential}\n"
        "factors: {faults: [enb-restart-3s, none]}\n"
        "faults: {enb-restart-3s: [{kind: enb_restart, at_s: 3, duration_s: 3}]}\n"
        "fixed: {core: srsepc, n_prb: 25, cc: cubic, sr_period_ms: 20}\n"
        "workload: {tool: iperf3, duration_s: 20}\n"
        "timeouts: {run_s: 150, request_s: 10}\n"
        "retry: {max_attempts: 1, backoff_s: 0, min_stack_speed: null}\n"),  # the test reads the speed first
        "zqr", LOCK_WAIT_S)
    rows = {json.loads(factors)["faults"]: (run_id, status, error) for run_id, status, error, factors in runs}
    assert [json.loads(f)["faults"] for *_, f in runs] == ["enb-restart-3s", "none"], runs
    speeds = {}
    for name, (run_id, *_) in rows.items():
        timing = json.loads((folder / "runs" / run_id / "manifest.json").read_text())["lab_timing"] \
            if (folder / "runs" / run_id / "manifest.json").is_file() else {}
        speeds[name] = timing.get("stack_speed")
    print(f"stack speed per run: {speeds}")
    known = [s for s in speeds.values() if isinstance(s, (int, float))]
    if known and min(known) < MIN_STACK_SPEED:
        pytest.skip(f"the stack ran at {min(known):.2f} of real time (< {MIN_STACK_SPEED}): the host, not the "
                    "stack, would decide what this test measures")
    assert {k: v[1] for k, v in rows.items()} == {"enb-restart-3s": "ok", "none": "ok"}, (rows, log)
    for name in ("enb-restart-3s",):
        run_dir = folder / "runs" / rows[name][0]
        t0 = json.loads((run_dir / "manifest.json").read_text())["workload_started_at"]
        report = json.loads((run_dir / "faults.json").read_text())
        restart = report["recovery"][-1]
        events = _events(run_dir, t0)
        assert restart["kind"] == "enb_restart" and restart["end_s"] is not None, restart
        # srsenb gone and back, as the lab and the broker saw it
        assert len(events["enb_down"]) == len(events["broker_enb_lost"]) == 1, events
        assert len(events["enb_up"]) == len(events["broker_enb_back"]) == 1, events
        assert events["broker_enb_back"][0] <= events["enb_up"][0] + 0.5, events
        # the UE back: a new RRC connection after the new srsenb came, its ping answering before the end
        assert restart["reattach_s"] is not None and restart["reattach_s"] >= events["broker_enb_back"][0], restart
        back_s = _ping_back(run_dir, t0, restart["start_s"])
        assert back_s < 20, back_s
        final = report["final_state"]
        assert final["rrc_state"] == {"0": "connected"} and final["ue_reaches_server"] == {"0": True}, final
        assert final["enb_running"] is True and final["not_back"] == [], final
        print(f"{name}: srsenb killed {restart['start_s']:.2f} s, up again {restart['end_s']:.2f} s (its start "
              f"{report['played'][-1]['reply'].get('start_s')} s), RLF {restart.get('rlf_s')}, new connection "
              f"{restart['reattach_s']:.2f} s ({restart['reattach_after_end_s']:.2f} s after srsenb was up, by "
              f"{restart['reattach_by']}), ping back {back_s:.2f} s; events {events}")
