"""cellab-zmq-broker's stack clock against stand-ins for srsenb and one srsue (srsRAN's ZMQ framing): per direction,
one record per TTI whose last sample passed, strictly increasing wall times within the blocks' own, the run id and
first TTI in the header, the rest written on clock_stop, on a new clock_start and on SIGTERM; bad commands refused.
No srsRAN needed; about a second."""

from __future__ import annotations

import json
import signal
import subprocess
import time

import numpy as np
import pytest
import zmq

from cellab.errors import CellabError
from cellab.labs.clock import StackClock
from cellab.paths import find_program
from cellab.ran.zmq_broker import BrokerProcess
from cellab.testkit.helpers import free_port

SRATE_HZ = 100_000  # the broker's least: 100 samples a TTI


@pytest.fixture
def stack():
    try:
        binary = find_program("cellab-zmq-broker")
    except CellabError as exc:
        pytest.skip(f"cellab-zmq-broker not built ({exc}): make build")
    enb_tx, enb_rx, ue_rx, ue_tx = (free_port() for _ in range(4))
    ep = "tcp://127.0.0.1:{}".format
    ctx = zmq.Context()

    def sock(kind, port, bind):
        s = ctx.socket(kind)
        s.setsockopt(zmq.RCVTIMEO, 3000)
        s.setsockopt(zmq.LINGER, 0)
        (s.bind if bind else s.connect)(ep(port))
        return s

    socks = {"enb_tx": sock(zmq.REP, enb_tx, True), "ue_tx": sock(zmq.REP, ue_tx, True)}
    proc = subprocess.Popen([str(binary), "--enb-tx", ep(enb_tx), "--enb-rx", ep(enb_rx), "--stats-s", "60",
                             "--srate-hz", str(SRATE_HZ), "--ue", f"rx={ep(ue_rx)},tx={ep(ue_tx)}"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout.readline().startswith("ready"), proc.stderr.read()
    socks |= {"enb_rx": sock(zmq.REQ, enb_rx, False), "ue_rx": sock(zmq.REQ, ue_rx, False)}
    yield socks, proc
    proc.kill()
    proc.wait()
    ctx.destroy(linger=0)


def _command(proc, line: str) -> dict:
    proc.stdin.write(line + "\n")
    proc.stdin.flush()
    return json.loads(proc.stdout.readline())


def _downlink(s, n_samples: int) -> None:
    s["ue_rx"].send(b"\xff")
    assert s["enb_tx"].recv() == b"\xff"
    s["enb_tx"].send(np.zeros(n_samples, np.complex64).tobytes())
    assert len(s["ue_rx"].recv()) == 8 * n_samples


def _uplink(s, n_samples: int) -> None:
    s["enb_rx"].send(b"\xff")
    s["ue_tx"].recv()
    s["ue_tx"].send(np.zeros(n_samples, np.complex64).tobytes())
    assert len(s["enb_rx"].recv()) == 8 * n_samples


def test_the_broker_records_each_ttis_passing_per_direction_and_flushes_on_stop_and_sigterm(stack, tmp_path):
    s, proc = stack
    _downlink(s, 150)  # before the recording: TTI 0 complete, TTI 1 half
    # the broker counts a block before handing it to the UEs, so a UE that has it finds it counted: no wait here
    # (three clean-clone CI runs raced a count made after the send)
    started = _command(proc, f"clock_start run-1 {tmp_path}")
    assert started == {"clock": "started", "run_id": "run-1", "dl_first_tti": 1, "ul_first_tti": 0}
    t_before = time.time_ns()
    for n in (50, 100, 100, 250, 50):  # TTI 1 ends; 2; 3; 4 and 5 in one block (6 half); 6 ends
        _downlink(s, n)
    for n in (100, 100, 100):
        _uplink(s, n)
    _downlink(s, 100 * 5000)  # 5000 TTIs in one block: more than the broker's buffer (CLOCK_CHUNK 4096)
    t_after = time.time_ns()
    assert _command(proc, "clock_stop") == {"clock": "stopped", "dl_ttis": 5006, "ul_ttis": 3, "run_id": "run-1"}

    dl = StackClock.from_file(tmp_path / "stack-clock-dl.bin", expect_run_id="run-1")
    ul = StackClock.from_file(tmp_path / "stack-clock-ul.bin", expect_run_id="run-1")
    assert (dl.ttis, dl.first_tti, ul.ttis, ul.first_tti) == (5006, 1, 3, 0)
    assert dl.header["samples_per_tti"] == 100 and dl.header["sample_rate_hz"] == SRATE_HZ
    assert t_before / 1e9 <= dl.wall_at(2.0) and dl.wall_at(5007.0) <= t_after / 1e9
    assert dl.tti_at(dl.wall_at(3.5)) == pytest.approx(3.5, abs=0.05)  # epoch s as a float: 0.24 us steps

    _downlink(s, 100)  # not recorded: between runs
    assert _command(proc, f"clock_start run-2 {tmp_path}")["dl_first_tti"] == 5008
    _downlink(s, 100)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(5) == -signal.SIGTERM  # its end still says SIGTERM
    again = StackClock.from_file(tmp_path / "stack-clock-dl.bin", expect_run_id="run-2")
    assert (again.ttis, again.first_tti) == (1, 5008)  # written on the way out


def test_bad_clock_commands_are_refused_and_change_nothing(stack, tmp_path):
    _, proc = stack
    for bad in ("clock_start", "clock_start run-1", f"clock_start run/1 {tmp_path}", "clock_start r1 relative/dir",
                f"clock_start r1 {tmp_path}/missing", f"clock_start r1 {tmp_path} extra", "clock_startx r1 /tmp"):
        reply = _command(proc, bad)
        assert "error" in reply and proc.poll() is None, (bad, reply)
    assert "clock_start RUN_ID DIR" in reply["error"]
    assert not list(tmp_path.iterdir())
    assert _command(proc, "clock_stop") == {"clock": "stopped", "dl_ttis": 0, "ul_ttis": 0, "run_id": ""}


def test_broker_process_starts_and_stops_a_runs_clock_and_needs_the_cells_rate(tmp_path):
    try:
        find_program("cellab-zmq-broker")
    except CellabError as exc:
        pytest.skip(f"cellab-zmq-broker not built ({exc}): make build")
    broker = BrokerProcess(tmp_path / "b", 1, netns=None, srate_hz=1.92e6)
    broker.start()
    try:
        assert broker.clock_start("r7", tmp_path)["dl_first_tti"] == 0
        assert broker.clock_stop() == {"clock": "stopped", "dl_ttis": 0, "ul_ttis": 0, "run_id": "r7"}
        assert StackClock.from_file(tmp_path / "stack-clock-dl.bin", "r7").header["samples_per_tti"] == 1920
    finally:
        broker.stop()
    rateless = BrokerProcess(tmp_path / "c", 1, netns=None)
    rateless.start()
    try:
        with pytest.raises(CellabError, match="--srate-hz"):
            rateless.clock_start("r8", tmp_path)
    finally:
        rateless.stop()
