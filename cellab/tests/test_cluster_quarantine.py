"""Quarantine retires only what a bench can be blamed for: a bench worker leaves the pool after a failed health
check or two failed runs in a row; an embedded slot (`--slots`, wired/virtual) never does; invalid runs (the host
lost real time), aborted ones and runs whose folder is over the per-run limit (the run's own size) never count.
The controller records the retirement in the campaign folder and the report shows it in its own section. No lab: the slot's lab session and run step are stand-ins."""

from __future__ import annotations

import textwrap
import time

import pytest
from distributed import Reschedule

from cellab.cluster import dispatch, outbox, worker
from cellab.errors import CellabError
from cellab.report.cluster import cluster_section
from cellab.results.cluster_events import EVENTS_FILE, read_events
from cellab.run import session as session_module
from cellab.run import step
from cellab.run.runner import Runner
from cellab.run.step import RunRecord
from cellab.testkit.helpers import write_lab


class _Worker:
    name = "bench-worker"
    address = "tcp://127.0.0.1:1"


class _Session:
    health_ok = True

    def __init__(self, lab, **_kw):
        self.lab = lab

    def open(self):
        if not _Session.health_ok:
            raise CellabError("agent ue1 did not answer within 10 s")

    def close(self):
        pass


@pytest.fixture
def slot(tmp_path, monkeypatch):
    """A slot whose runs end with the statuses a test queues (statuses.append(...))."""
    statuses: list[str] = []
    _Session.health_ok = True

    def fake_run(_session, _campaign, run, run_dir, *_args, **_kw):
        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / "manifest.json").write_text("{}")
        status = statuses.pop(0)
        return RunRecord(run.run_id, status, 1, None if status == "ok" else f"{status} on purpose")

    monkeypatch.setattr(session_module, "LabSession", _Session)
    monkeypatch.setattr(step, "execute_run", fake_run)
    monkeypatch.setattr(step, "check_module_params", lambda *_a: None)
    fake = _Worker()
    made = worker.Slot(0, fake, tmp_path / "scratch")
    yield made, fake, statuses
    made.close()


def _job(lab: str, index: int) -> dict:
    text = textwrap.dedent(f"""
        name: q
        lab: {lab}
        workload: {{tool: iperf3, duration_s: 2}}
    """)
    run = {"run_id": f"r{index:04d}", "index": index, "repeat": 0, "factors": {}, "params": {}}
    return {"campaign_text": text, "run": run, "lab": lab, "ue_count": 1, "marker": f"m{index}"}


@pytest.fixture
def bench_lab(tmp_path, monkeypatch):
    inventory = write_lab(tmp_path / "lab")
    monkeypatch.setenv(worker.WORKER_LAB_ENV, str(inventory))
    return "bench:test"


def _retired(result: dict) -> dict | None:
    return result["record"]["placement"].get("retired")


def test_a_bench_retires_after_two_failed_runs_in_a_row(slot, bench_lab):
    made, fake, statuses = slot
    statuses += ["failed", "ok", "failed", "failed"]
    outcomes = [made.submit(_job(bench_lab, i)) for i in range(4)]
    assert [_retired(r) for r in outcomes[:3]] == [None, None, None]  # an ok run in between clears the count
    retired = _retired(outcomes[3])
    assert retired and retired["reason"] == "2 runs in a row failed" and retired["worker"] == "bench-worker"
    assert "left the pool" in outcomes[3]["record"]["error"] and retired["address"] == fake.address
    with pytest.raises(Reschedule):  # a retired bench hands the runs that still reach it back to Dask
        made.submit(_job(bench_lab, 4))


def test_invalid_and_aborted_runs_never_count_against_a_bench(slot, bench_lab):
    made, fake, statuses = slot
    statuses += ["invalid", "invalid", "aborted", "invalid", "failed", "invalid", "ok"]
    outcomes = [made.submit(_job(bench_lab, i)) for i in range(7)]
    assert all(_retired(r) is None for r in outcomes)


def test_a_run_folder_over_the_limit_fails_its_run_and_never_counts_against_a_bench(slot, bench_lab, monkeypatch):
    made, fake, statuses = slot
    monkeypatch.setenv(outbox.LIMIT_ENV, "1")
    ran = step.execute_run

    def oversized(_session, _campaign, run, run_dir, *args, **kw):
        record = ran(_session, _campaign, run, run_dir, *args, **kw)
        (run_dir / "capture.pcap").write_bytes(b"\0" * (2 << 20))  # the run's own capture: 2 MiB over 1 MiB
        return record

    monkeypatch.setattr(step, "execute_run", oversized)
    statuses += ["failed", "ok", "ok", "ok"]  # a bench's own failure, then three runs too large to send
    outcomes = [made.submit(_job(bench_lab, i)) for i in range(4)]
    assert [r["record"]["status"] for r in outcomes] == ["failed"] * 4
    assert all("more than the limit of 1 MiB per run" in r["record"]["error"] for r in outcomes[1:])
    assert all(_retired(r) is None for r in outcomes) and made.retired is None
    statuses += ["failed"]  # the bench's own failure after them is its first in a row, not its fourth
    assert _retired(made.submit(_job(bench_lab, 4))) is None
    statuses += ["failed"]
    assert _retired(made.submit(_job(bench_lab, 5)))["reason"] == "2 runs in a row failed"


def test_an_embedded_slot_is_never_retired(slot, monkeypatch):
    made, fake, statuses = slot
    monkeypatch.delenv(worker.WORKER_LAB_ENV, raising=False)
    statuses += ["failed"] * 4
    outcomes = [made.submit(_job("wired", i)) for i in range(4)]
    assert [r["record"]["status"] for r in outcomes] == ["failed"] * 4
    assert all(_retired(r) is None for r in outcomes)
    _Session.health_ok = False  # a lab that does not come up fails its run, and the slot stays
    made.session_key = None
    with pytest.raises(CellabError, match="did not answer"):
        made.submit(_job("virtual", 9))
    assert made.retired is None


def test_a_failed_health_check_retires_a_bench_and_fails_its_run(slot, bench_lab):
    made, fake, _ = slot
    _Session.health_ok = False
    result = made.submit(_job(bench_lab, 0))
    assert result["record"]["status"] == "failed" and "did not answer" in result["record"]["error"]
    assert _retired(result)["reason"] == "its health check failed"
    with pytest.raises(Reschedule):
        made.submit(_job(bench_lab, 1))


class _Done:
    def __init__(self, result):
        self._result = result

    def result(self):
        return self._result


def test_the_controller_records_a_retired_bench_and_the_report_shows_it(tmp_path):
    campaign = tmp_path / "c.yaml"
    campaign.write_text("name: q\nlab: wired\nrepeat: 2\nworkload: {tool: iperf3, duration_s: 2}\n")
    runner = Runner.new(campaign, tmp_path / "out")
    root = runner.store.root
    assert cluster_section(root) is None  # nothing retired: no section
    run = next(iter(runner.store.pending()))
    now = time.time()
    retired = {"worker": "wb", "bench": "/labs/b.yaml", "reason": "2 runs in a row failed", "at": now}
    record = {"run_id": run.run_id, "status": "failed", "attempts": 1, "error": "boom", "metrics": None,
              "ue_metrics": None, "placement": {"worker": "wb", "retired": retired}, "started_at": now - 1,
              "finished_at": now}
    counts = {"ok": 0, "failed": 0, "aborted": 0, "invalid": 0}
    got, files, _ = dispatch._outcome(_Done({"record": record, "files": {}}), run)
    dispatch._store(runner, run, got, files, counts)
    dispatch._note_retired(runner, run, got)
    (event,) = read_events(root)[0]
    assert event["kind"] == "retired" and event["worker"] == "wb" and event["run_id"] == run.run_id
    section = cluster_section(root)
    (table,) = section.tables
    assert table.rows[0][:3] == ["wb", "/labs/b.yaml", "2 runs in a row failed"] and "UTC" in table.rows[0][3]


def test_a_damaged_events_file_is_named_not_a_traceback(tmp_path):
    (tmp_path / EVENTS_FILE).write_text('{"events": [{"kind": "retired", "at": "soon"}, 3]}')
    events, problem = read_events(tmp_path)
    assert events == [] and "2 entries of the wrong shape" in problem
    assert "partly unreadable" in cluster_section(tmp_path).notes[0]
    (tmp_path / EVENTS_FILE).write_text("[not json")
    assert "unreadable" in read_events(tmp_path)[1]


def test_the_report_page_has_the_cluster_section(tmp_path):
    from cellab.report.page import write_report
    from cellab.results.cluster_events import add_event

    campaign = tmp_path / "c.yaml"
    campaign.write_text("name: q\nlab: wired\nrepeat: 2\nworkload: {tool: iperf3, duration_s: 2}\n")
    runner = Runner.new(campaign, tmp_path / "out")
    for run in list(runner.store.pending()):
        runner.store.import_files(run, {"manifest.json": b"{}"})
        now = time.time()
        runner.store.save_record(run, RunRecord(run.run_id, "failed", 1, "boom", placement={"worker": "wb"},
                                                started_at=now, finished_at=now), started=False)
    add_event(runner.store.root, "retired", worker="wb", bench="/labs/b.yaml", reason="its health check failed",
              run_id=run.run_id)
    runner.hold.release()
    page = write_report(runner.store.root, workers=1).read_text()
    assert 'id="cluster"' in page and "Retired benches" in page and "its health check failed" in page
