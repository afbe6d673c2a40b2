"""Issue 42, "a lab left up fills nothing", for srsRAN's logs: srsRAN's `[log] file_max_size` only splits a log
(NAME.EXT, NAME.1.EXT, NAME.2.EXT, ...: srsRAN 4G's srslog file sink, which removes none), so cellab.ran.logbound
removes all but the newest two segments and its readers read across them. Against the stand-in srsenb (which
splits its PHY log as srslog does): the eNB agent keeps srsenb's log within a small bound while its
sr_occasions.jsonl still gets every SR occasion; and the srsue log's readers see every line since a position."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

from cellab.bus.testing import lab_bus
from cellab.contracts.enb import ConfigureParams, EnbClient, RadioOverrides
from cellab.envvars import LAB_LOG_MAX_ENV
from cellab.ran import logbound
from cellab.ran.agent import EnbAgent
from cellab.ran.srsenb_proc import with_log_file_max_kib
from cellab.ran.ue_events import RrcEventTail

ROOM = Path(__file__).resolve().parents[1]
BOUND_BYTES = 65536  # the least bound: segments of 21 KiB
SR_PERIOD_MS = 5  # the stand-in's PHY log then grows about 32 KB a second
LEFT_UP_S = 4.0
RRC = "2026-11-26T14:13:{s:02d}.{us:06d} [RRC    ] [I] Detected 1 out-of-sync from PHY. Starting T310 timer 200 ms\n"


def _split_write(path: Path, lines: list[str], max_bytes: int, state: dict) -> None:
    """Lines appended as srslog's file sink writes them: the line that reaches max_bytes opens NAME.N.EXT."""
    for line in lines:
        state["size"] = state.get("size", 0) + len(line)
        if state["size"] >= max_bytes:
            state["index"], state["size"] = state.get("index", 0) + 1, len(line)
        index = state.get("index", 0)
        seg = path if index == 0 else path.with_name(f"{path.stem}.{index}{path.suffix}")
        with open(seg, "a") as out:
            out.write(line)


def _on_disk(path: Path) -> int:
    return sum(p.stat().st_size for _, p in logbound.segments(path) if p.exists())


def test_the_split_size_and_the_segments_are_srslogs():
    assert logbound.file_max_size_kib(0) == -1  # no bound: one file
    assert logbound.file_max_size_kib(BOUND_BYTES) == 21 and logbound.file_max_size_kib(256 << 20) == 87381
    conf = with_log_file_max_kib("[log]\nall_level = warning\nfile_max_size = -1\n[scheduler]\n", 21)
    assert conf.count("file_max_size") == 1 and "file_max_size = 21\n[scheduler]" in conf
    for bad in (0, 3, True, 2.5):
        with pytest.raises(ValueError, match="file_max_size"):
            with_log_file_max_kib(conf, bad)


def test_segments_are_ordered_by_index_and_a_new_process_removes_them_all(tmp_path: Path):
    for name in ("enb.log", "enb.1.log", "enb.2.log", "enb.10.log", "enb.x.log", "other.1.log"):
        (tmp_path / name).write_text(name)
    assert [i for i, _ in logbound.segments(tmp_path / "enb.log")] == [0, 1, 2, 10]
    assert logbound.read_all(tmp_path / "enb.log", 100) == b"enb.logenb.1.logenb.2.logenb.10.log"
    logbound.remove_all(tmp_path / "enb.log")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["enb.x.log", "other.1.log"]


def test_a_tail_reads_every_line_once_across_segments_and_keeps_the_log_within_the_bound(tmp_path: Path):
    log, state = tmp_path / "srsue.log", {}
    seg_bytes = logbound.file_max_size_kib(BOUND_BYTES) * 1024
    tail, seen, largest = logbound.SegmentTail(log), b"", 0
    lines = [f"line {n:06d} " + "x" * (40 + n % 60) + "\n" for n in range(4000)]  # about 10 segments
    for start in range(0, len(lines), 90):  # the reader polls between bursts of writing
        _split_write(log, lines[start:start + 90], seg_bytes, state)
        largest = max(largest, _on_disk(log))
        seen += tail.read_new()
    print(f"a tailed log of {sum(map(len, lines))} B in {state['index'] + 1} segments: at most {largest} B on disk "
          f"(bound {BOUND_BYTES} B)")
    assert seen.decode() == "".join(lines)  # every line, once, in order
    assert state["index"] >= 8 and largest <= BOUND_BYTES


def test_no_rrc_event_is_lost_to_the_bound_however_long_srsue_runs(tmp_path: Path):
    log, state = tmp_path / "srsue.log", {}
    tail = RrcEventTail(log, 0)
    _split_write(log, [RRC.format(s=0, us=n) for n in range(300)], 4096, state)  # an RLF long before
    tail.events()  # the lab's pruner reads on, and prunes what it read
    _split_write(log, [RRC.format(s=1, us=n).replace("Starting T310 timer", "Cell search") for n in range(900)],
                 4096, state)
    tail.events()
    assert state["index"] >= 20 and len(logbound.segments(log)) <= 2  # the RLF's segment is long gone
    events = tail.events(since_s=0.0)
    assert len(events) == 300 and all(e["event"] == "t310_start" for e in events)  # and still known


def test_the_enb_agent_keeps_srsenbs_log_within_the_bound_and_every_sr_occasion(tmp_path: Path, monkeypatch,
                                                                                 fake_srsenb: Path):
    monkeypatch.setenv(LAB_LOG_MAX_ENV, str(BOUND_BYTES))
    with lab_bus(tmp_path, {"enb1": EnbAgent},
                 agent_kwargs={"enb1": {"srsenb_bin": fake_srsenb, "report_poll_s": 0.1}}) as (ctl, agents):
        EnbClient(ctl, "enb1").configure(ConfigureParams(
            profile_yaml=(ROOM / "examples/zmq-25prb.yaml").read_text(), profile_name="zmq-25prb.yaml",
            overrides=RadioOverrides(sr_period_ms=SR_PERIOD_MS)))
        config = agents["enb1"].artifact_dir / "config"
        assert "file_max_size = 21" in (config / "enb.conf").read_text()
        largest, newest, end = 0, 0, time.monotonic() + LEFT_UP_S
        while time.monotonic() < end:
            largest = max(largest, _on_disk(config / "enb.log"))
            newest = max([newest] + [i for i, _ in logbound.segments(config / "enb.log")])
            time.sleep(0.05)
        rows = [json.loads(line) for line in (agents["enb1"].artifact_dir / "sr_occasions.jsonl").read_text()
                .splitlines()]
    print(f"srsenb's log over {LEFT_UP_S:g} s: {newest + 1} segments, at most {largest} B on disk (bound "
          f"{BOUND_BYTES} B); {len(rows)} SR occasions read")
    assert newest >= 3 and 0 < largest <= BOUND_BYTES
    gaps = {(b["tti"] - a["tti"]) % 10240 for a, b in zip(rows, rows[1:], strict=False)}
    assert len(rows) >= 100 and gaps == {SR_PERIOD_MS}  # every occasion, across every segment


def test_srsenbs_report_has_its_read_part_freed_on_disk_and_every_object_read(tmp_path: Path):
    from cellab.ran.report import ReportTail

    report, keep = tmp_path / "enb_report.json", 16384
    tail, seen, largest = ReportTail(report, keep), [], 0
    with open(report, "w") as out:  # as srsenb writes it: one file, at its own offset (no append mode)
        out.write("Software Radio Systems RAN (srsRAN)\n")
        for n in range(2000):
            out.write(json.dumps({"type": "metrics", "n": n, "pad": "x" * 200}, indent=2) + "\n")
            if n % 25 == 24:
                out.flush()
                seen += [obj["n"] for obj in tail.read_new()]
                largest = max(largest, report.stat().st_blocks * 512)
    size = report.stat().st_size
    print(f"a report of {size} B: at most {largest} B of blocks on disk (keep {keep} B)")
    assert seen == list(range(2000))  # every object, in order, across the freed part
    assert size > 10 * keep and largest <= 2 * keep + 16384  # two halves and one burst of writing


def test_the_agents_own_files_keep_their_older_half_and_join_back_whole(tmp_path: Path):
    path, lines = tmp_path / "sr_occasions.jsonl", [json.dumps({"n": n, "pad": "y" * 80}) + "\n" for n in range(3000)]
    largest = 0
    for start in range(0, len(lines), 7):
        logbound.append_bounded(path, "".join(lines[start:start + 7]), BOUND_BYTES)
        largest = max(largest, sum(p.stat().st_size for p in (path, logbound.older(path)) if p.exists()))
    joined = logbound.join_older(logbound.older(path).read_bytes(), path.read_bytes()).decode()
    kept = [json.loads(line)["n"] for line in joined.splitlines()]
    assert largest <= BOUND_BYTES and kept == list(range(kept[0], 3000))  # the latest, consecutive
    assert len(joined) >= BOUND_BYTES // 2 and kept[0] > 0


def test_srsenbs_console_keeps_its_older_half(tmp_path: Path):
    from cellab.ran.srsenb_proc import READY_LINE, SrsenbProcess

    script = tmp_path / "srsenb"
    script.write_text(f"#!{sys.executable}\nfor n in range(4000):\n    print(f'console line {{n:05d}}', flush=True)\n"
                      f"print({READY_LINE!r}, flush=True)\nimport time\ntime.sleep(60)\n")  # until stopped
    script.chmod(0o755)
    console = tmp_path / "srsenb_console.log"
    proc = SrsenbProcess(script, tmp_path, console, console_max_bytes=BOUND_BYTES)
    proc.start()
    proc.wait_ready(30)
    proc.stop()
    text = logbound.older(console).read_text() + console.read_text()
    assert console.stat().st_size + logbound.older(console).stat().st_size <= BOUND_BYTES
    assert text.splitlines()[-1] == READY_LINE and "console line 03999" in text


def test_srsue_metrics_keep_their_header_and_latest_lines_within_the_bound(tmp_path: Path):
    from cellab.ran.srsue_proc import SrsueProcess, UeSettings, write_ue_telemetry

    ue = SrsueProcess(tmp_path / "srsue", tmp_path, UeSettings(), netns=None, ue_netns="x-ue0")
    header = "time;cc;rsrp;dl_snr;dl_brate;is_attached\n"
    largest = 0
    with open(ue.metrics, "w") as out:  # as srsue writes it: one file at its own offset, a line a second
        out.write(header)
        for n in range(1, 20001):
            out.write(f"{n * 1000};0;{60 + n % 7};30;{n}.5e3;1\n")
            if n % 100 == 0:
                out.flush()
                ue.bound_logs(BOUND_BYTES)  # the lab's pruner, every 5 s
                largest = max(largest, ue.metrics.stat().st_blocks * 512)
    kept = logbound.head_and_tail(ue.metrics, BOUND_BYTES).decode()
    times = [int(line.split(";")[0]) for line in kept.splitlines()[1:]]
    print(f"srsue's metrics: {ue.metrics.stat().st_size} B written, at most {largest} B of blocks on disk")
    assert largest <= BOUND_BYTES + 8192 and ue.metrics.stat().st_size > 3 * BOUND_BYTES
    assert kept.startswith(header) and times[-1] == 20_000_000 and times == list(range(times[0], times[-1] + 1, 1000))
    ue.console.write_text("Random Access Complete.     c-rnti=0x46, ta=0\n")
    rows = [json.loads(line) for line in write_ue_telemetry(ue, "ue0", 0.0, tmp_path / "telemetry")
            .read_text().splitlines()]
    assert len(rows) == len(times) and rows[-1]["dl_bitrate_bps"] == 20000.5e3  # the telemetry reads past the hole


def test_srsues_console_is_freed_beyond_the_bound_and_its_attaches_still_counted(tmp_path: Path):
    from cellab.ran.srsue_proc import SrsueProcess, UeSettings

    ue, largest = SrsueProcess(tmp_path / "srsue", tmp_path, UeSettings(), netns=None, ue_netns="x-ue0"), 0
    with open(ue.console, "w") as out:  # srsue's stdout: one file at its own offset
        for n in range(1, 8001):
            out.write("Current sample rate is 1.92 MHz with a base rate of 5.76 MHz (x3 decimation)\n")
            if n % 1000 == 0:  # an attach now and then, far apart
                out.write(f"Random Access Complete.     c-rnti=0x{n // 1000 + 0x45:x}, ta=0\n"
                          f"Network attach successful. IP: 172.16.0.{n // 1000}\n")
            if n % 200 == 0:
                out.flush()
                ue.bound_logs(BOUND_BYTES)  # the lab's pruner: read on, then free the middle
                largest = max(largest, ue.console.stat().st_blocks * 512)
    print(f"srsue's console: {ue.console.stat().st_size} B written, at most {largest} B of blocks on disk")
    assert ue.console.stat().st_size > 5 * BOUND_BYTES and largest <= BOUND_BYTES + 8192
    assert (ue.attach_count(), ue.attached_ip(), ue.rnti()) == (8, "172.16.0.8", "4d")
    assert "172.16.0.8" in ue.console_text() and "\0" not in ue.console_text()


def test_the_brokers_log_keeps_its_latest_stats_lines_within_the_bound(tmp_path: Path):
    from cellab.ran.zmq_broker import BrokerProcess

    broker, largest = BrokerProcess(tmp_path, 1, netns=None), 0
    with open(broker.log, "w") as out:  # the broker's stdout: one file at its own offset
        out.write("ready: 1 UEs\n")
        for n in range(1, 6001):
            out.write(json.dumps({"t_s": 2.0 * n, "dl_msps": 5.76, "ul_msps": 5.76, "dl_waits_for": "x" * 40}) + "\n")
            if n % 300 == 0:
                out.flush()
                logbound.free_middle(broker.log, BOUND_BYTES)  # the lab's pruner
                largest = max(largest, broker.log.stat().st_blocks * 512)
    times = [r["t_s"] for r in broker.rates()]
    print(f"the broker's log: {broker.log.stat().st_size} B written, at most {largest} B of blocks on disk")
    assert broker.log.stat().st_size > 5 * BOUND_BYTES and largest <= BOUND_BYTES + 8192
    assert times[-1] == 12000.0 and times == [2.0 * n for n in range(int(times[0] / 2), 6001)]


class _FolderController:
    """Fetches an agent's artifact from a folder of its own (controller.fetch_artifact's contract: the file
    copied to dest, an error when the agent has none)."""

    def __init__(self, folders: dict[str, Path]):
        self.folders = folders

    def fetch_artifact(self, agent: str, name: str, dest: Path) -> Path:
        dest.write_bytes((self.folders[agent] / name).read_bytes())  # FileNotFoundError: the agent has none
        return dest


def test_a_core_daemons_log_is_fetched_with_its_older_half_first(tmp_path):
    """The core agent renames a daemon's log NAME.log.1 and the daemon reopens NAME.log (cellab.epc.logbound):
    the lab's fetch (the Open5GS restoration lines a fault's recovery reads) joins them, older first."""
    from types import SimpleNamespace

    from cellab.ran.zmqlab_run import RunRecords

    logs = tmp_path / "core1" / "core-runs" / "001" / "logs"
    logs.mkdir(parents=True)
    (logs / "smf.log.1").write_text("line 1\nline 2\n")
    (logs / "smf.log").write_text("line 3\n")
    (logs / "upf.log").write_text("line 1\n")
    lab = SimpleNamespace(controller=_FolderController({"core1": tmp_path / "core1"}), _agent=lambda role: "core1")
    joined = RunRecords._fetch_joined(lab, "core", "core-runs/001/logs/smf.log", tmp_path / "smf.log")
    assert joined.read_text() == "line 1\nline 2\nline 3\n"
    alone = RunRecords._fetch_joined(lab, "core", "core-runs/001/logs/upf.log", tmp_path / "upf.log")
    assert alone.read_text() == "line 1\n" and not (tmp_path / "upf.log.1").exists()
