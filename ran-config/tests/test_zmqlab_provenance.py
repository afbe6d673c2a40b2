"""Issue 39: a run's manifest on the srsran-zmq lab names the srsRAN and EPC software it ran: srsenb (the eNB
agent), the EPC's daemons (the core agent: Open5GS by default, srsepc by choice) and each srsue (the lab) by the
version they print and the sha256 of the binary their process executes (srsRAN's equal to the bundle's files);
the store keeps the same (run_software)."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path

import pytest

from .conftest import LOCK_WAIT_S, run_zmq_campaign


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.root
@pytest.mark.extended  # a minute of srsRAN; the provenance records themselves are unit-tested in cellab/tests
@pytest.mark.timeout(LOCK_WAIT_S + 600)  # the srsRAN lock may be held by another stack for minutes; the run ~60 s
def test_a_runs_manifest_names_srsran_and_the_epc_by_version_and_hash(bundle, tmp_path):
    folder, runs, log = run_zmq_campaign(bundle, tmp_path, (
        "name: zmq-provenance\nlab: srsran-zmq\nrepeat: 1\n"
        "fixed: {n_prb: 25, cc: cubic, sr_period_ms: 20}\n"
        "workload: {tool: iperf3, duration_s: 3}\n"
        "timeouts: {run_s: 120, request_s: 6}\n"
        "retry: {max_attempts: 1, backoff_s: 0, min_stack_speed: null}\n"), "zqp", 60)  # what ran, not how fast
    [(run_id, status, error, _)] = runs
    assert status == "ok", (error, log)
    provenance = json.loads((folder / "runs" / run_id / "manifest.json").read_text())["provenance"]
    agents = {a.get("role"): a for a in provenance["agents"].values()}
    expected = {name: _sha256(bundle / name) for name in ("srsenb", "srsepc", "srsue")}

    enb = agents["enb"]["software"]
    assert enb["programs"]["srsenb"]["sha256"] == expected["srsenb"], enb
    assert enb["running"]["srsenb"]["sha256"] == expected["srsenb"], enb  # the process's own binary
    assert enb["running"]["srsenb"]["replaced_on_disk"] is False
    assert enb["programs"]["srsenb"]["version"], enb  # what `srsenb --version` printed

    core = agents["core"]["software"]  # the lab's EPC (Open5GS by default, srsepc or NextEPC by choice)
    assert core["flavour"] in ("open5gs", "srsepc", "nextepc") and core["version"], core  # printed at its start
    daemons = {name: r for name, r in core["running"].items() if r}
    assert daemons, core
    for name, record in daemons.items():  # each daemon by the binary its process executes, as on disk
        assert record["sha256"] == _sha256(Path(record["path"])) and not record["replaced_on_disk"], (name, record)
    if core["flavour"] == "srsepc":
        assert {r["sha256"] for r in daemons.values()} == {expected["srsepc"]}, core

    lab = provenance["lab"]
    assert lab["programs"]["srsue"]["sha256"] == expected["srsue"] and lab["programs"]["srsue"]["version"], lab
    assert lab["running"]["srsue0"]["sha256"] == expected["srsue"], lab
    assert len(lab["running"]["cellab-zmq-broker"]["sha256"]) == 64, lab
    print(f"srsenb {enb['programs']['srsenb']['version']!r}, EPC {core['version']!r}, "
          f"srsue {lab['programs']['srsue']['version']!r}")

    with sqlite3.connect(folder / "results.sqlite") as db:  # the store keeps what the manifest says
        stored = dict(db.execute("SELECT key, value FROM run_software WHERE run_id = ?", (run_id,)))
    assert expected["srsenb"] in stored.values() and expected["srsue"] in stored.values(), sorted(stored)[:20]
    assert core["version"] in stored.values() and all(r["sha256"] in stored.values() for r in daemons.values())
