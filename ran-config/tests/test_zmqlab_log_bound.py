"""Issue 42 on the real stack: an srsran-zmq lab left up with a small log bound keeps srsenb's log, each srsue's and
the eNB agent's files within it (srsRAN splits its logs, cellab.ran.logbound prunes them), and the lab still
knows what they said: the UE left out of reach for longer than its log's bound holds is known to have lost the
cell (its RLF line long pruned), so configure brings it back; a run afterwards gets the RRC events of a radio
link failure and the way back, the eNB's SR receptions, the collected files. The broker's stack clock records
only while a run does. Extended: it takes the srsRAN lock for about three minutes."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from cellab.envvars import LAB_LOG_MAX_ENV
from cellab.ran import logbound

BOUND_BYTES = 256 << 10  # segments of 85 KiB: srsue out of the cell's reach fills one in about ten seconds
CONNECTED_S, OUT_OF_REACH_S, OUTAGE_S = 30.0, 60.0, 4.0
PARAMS = {"n_prb": 25, "sr_period_ms": 10}


def _on_disk(path: Path) -> int:
    """A log's bytes on disk: its srslog segments, or the file and its older half (NAME.1)."""
    paths = [p for _, p in logbound.segments(path)] + [logbound.older(path)]
    return sum(p.stat().st_blocks * 512 for p in dict.fromkeys(paths) if p.exists())


def _watch(logs: dict[str, Path], largest: dict[str, int], seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for name, path in logs.items():
            largest[name] = max(largest.get(name, 0), _on_disk(path))
        time.sleep(0.2)


@pytest.mark.extended
def test_a_lab_left_up_stays_within_its_bound_and_a_run_still_gets_its_lines(bundle, tmp_path, monkeypatch):
    from cellab.run.session import LabSession

    monkeypatch.setenv("CELLAB_SRSRAN_BIN", str(bundle))
    monkeypatch.setenv(LAB_LOG_MAX_ENV, str(BOUND_BYTES))  # the session's agents inherit it
    with LabSession("srsran-zmq", prefix="zql", ue_count=1, purpose="test") as session:
        lab = session.lab
        lab.configure(PARAMS)
        enb_dir = session._tmp / "artifacts" / next(n for n, r in lab.lab_agents.items() if r == "enb")
        ue = lab._ues[0]
        logs = {"srsenb log": enb_dir / "config" / "enb.log", "srsue log": ue.log, "srsue console": ue.console,
                "srsue metrics": ue.metrics, "broker log": lab._broker.log,
                "sr_occasions.jsonl": enb_dir / "sr_occasions.jsonl", "enb report": enb_dir / "config" /
                "enb_report.json"}
        clock = lab.state_dir / "broker" / "clock" / "stack-clock-dl.bin"
        largest: dict[str, int] = {}
        _watch(logs, largest, CONNECTED_S)
        lab.collect(tmp_path / "run0")  # the first run's end: its clock stops
        clock_size = clock.stat().st_size
        lab.set_ue_attenuation(0, 60.0)  # left out of the cell's reach: srsue logs its cell search
        _watch(logs, largest, OUT_OF_REACH_S)
        assert clock.stat().st_size == clock_size  # an idle lab records no stack clock
        segments = {name: logbound.segments(path)[-1][0] for name, path in logs.items() if "log" in name}
        lab.set_ue_attenuation(0, 0.0)
        lab.configure(PARAMS)  # back in reach (re-established, or restarted)

        start = time.time()
        lab.set_ue_attenuation(0, 60.0)
        time.sleep(OUTAGE_S)
        lab.set_ue_attenuation(0, 0.0)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not any(e["event"] in ("reest_complete", "connect_complete")
                                                      for e in lab.rrc_events(lab._ues[0])):
            time.sleep(0.5)
        truth = lab.ground_truth(PARAMS)
        occasions = [json.loads(line) for line in (lab.state_dir / "sr_occasions.jsonl").read_text().splitlines()]
        arts = lab.collect(tmp_path / "run1")
    print(f"left up {CONNECTED_S + OUT_OF_REACH_S:g} s with a {BOUND_BYTES} B bound: largest on disk {largest}; "
          f"last segment index {segments}")
    assert all(0 < size <= BOUND_BYTES for size in largest.values()), largest
    assert segments["srsue log"] >= 2, segments  # split, and its older segments pruned
    events = [json.loads(line) for line in Path(arts["lab-events"]).read_text().splitlines()]
    rrc = [e["event"] for e in events if e.get("ue") == 0 and e["t_s"] >= start]
    assert "rlf" in rrc and ("reest_complete" in rrc or "connect_complete" in rrc), rrc
    assert truth is not None and any(o["t_s"] >= start for o in occasions)  # the eNB's SR receptions, fetched
    assert Path(arts["srsue-log"]).stat().st_size <= BOUND_BYTES and Path(arts["stack-clock-dl"]).exists()
