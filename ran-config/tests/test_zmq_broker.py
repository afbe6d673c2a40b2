"""cellab-zmq-broker against stand-ins for srsenb and two srsue speaking srsRAN's ZMQ radio framing (a 1-byte
request, a reply of cf_t samples): downlink copied (and scaled by a UE's dl_gain_db), uplink summed sample for
sample when the UEs' blocks differ in size (each UE's weighted by its ul_gain_db), a UE's gains changed while the
stream runs (stdin `gain I DB`, `ul_gain I DB`), bad input refused. No srsRAN needed; well under a second."""

from __future__ import annotations

import json
import socket
import subprocess
import threading

import numpy as np
import pytest
import zmq

from cellab.errors import CellabError
from cellab.paths import find_program
from cellab.ran.zmq_broker import BrokerProcess, broker_argv
from cellab.testkit.helpers import free_port


@pytest.fixture(scope="module")
def broker_bin():
    try:
        return find_program("cellab-zmq-broker")
    except Exception as exc:  # noqa: BLE001
        pytest.skip(f"cellab-zmq-broker not built ({exc}): make build")


def _free_ports(n: int) -> list[int]:
    return [free_port() for _ in range(n)]  # never the same twice in a process


def _samples(*values: complex) -> bytes:
    return np.array(values, dtype=np.complex64).tobytes()


def _recv_samples(sock: zmq.Socket) -> np.ndarray:
    return np.frombuffer(sock.recv(), dtype=np.complex64)


@pytest.fixture
def stack(broker_bin):
    enb_tx, enb_rx, ue0_rx, ue0_tx, ue1_rx, ue1_tx = _free_ports(6)
    ep = "tcp://127.0.0.1:{}".format
    argv = [str(broker_bin), "--enb-tx", ep(enb_tx), "--enb-rx", ep(enb_rx), "--stats-s", "60",
            "--ue", f"rx={ep(ue0_rx)},tx={ep(ue0_tx)}", "--ue", f"rx={ep(ue1_rx)},tx={ep(ue1_tx)},dl_gain_db=-20"]
    ctx = zmq.Context()
    socks = {}

    def sock(kind, endpoint, bind):
        return _stand_in_socket(ctx, kind, endpoint, bind)

    # the stand-ins bind and connect as srsenb and srsue do (tx = REP bound, rx = REQ connected)
    socks["enb_tx"] = sock(zmq.REP, ep(enb_tx), True)
    socks["ue0_tx"] = sock(zmq.REP, ep(ue0_tx), True)
    socks["ue1_tx"] = sock(zmq.REP, ep(ue1_tx), True)
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout.readline().startswith("ready"), proc.stderr.read()
    socks["enb_rx"] = sock(zmq.REQ, ep(enb_rx), False)
    socks["ue0_rx"] = sock(zmq.REQ, ep(ue0_rx), False)
    socks["ue1_rx"] = sock(zmq.REQ, ep(ue1_rx), False)
    yield socks, proc
    proc.kill()
    proc.wait()
    ctx.destroy(linger=0)


def _stand_in_socket(ctx, kind, endpoint, bind):
    """A stand-in srsenb's or srsue's socket: 3 s receive timeout, no linger."""
    s = ctx.socket(kind)
    s.setsockopt(zmq.RCVTIMEO, 3000)
    s.setsockopt(zmq.LINGER, 0)
    (s.bind if bind else s.connect)(endpoint)
    return s


def test_downlink_block_reaches_every_ue_scaled_by_its_gain(stack):
    s, _ = stack
    s["ue0_rx"].send(b"\xff")
    s["ue1_rx"].send(b"\xff")
    assert s["enb_tx"].recv() == b"\xff"  # asked once every UE asked
    block = _samples(1 + 2j, -3 + 4j, 0.5 - 0.25j)
    s["enb_tx"].send(block)
    assert _recv_samples(s["ue0_rx"]).tobytes() == block
    np.testing.assert_allclose(_recv_samples(s["ue1_rx"]), np.frombuffer(block, np.complex64) * 0.1, rtol=1e-5)


def _one_downlink_block(s, block: bytes) -> tuple[np.ndarray, np.ndarray]:
    s["ue0_rx"].send(b"\xff")
    s["ue1_rx"].send(b"\xff")
    assert s["enb_tx"].recv() == b"\xff"
    s["enb_tx"].send(block)
    return _recv_samples(s["ue0_rx"]), _recv_samples(s["ue1_rx"])


def test_a_ues_gain_changes_while_the_stream_runs_and_a_bad_command_changes_nothing(stack):
    s, proc = stack
    block = _samples(1 + 2j, -3 + 4j)
    for command, reply in (("gain 1 0", '{"gain_ue":1,"dl_gain_db":0.000}'),
                           ("gain 0 6.02", '{"gain_ue":0,"dl_gain_db":6.020}')):
        proc.stdin.write(command + "\n")
        proc.stdin.flush()
        assert proc.stdout.readline().strip() == reply
    ue0, ue1 = _one_downlink_block(s, block)
    np.testing.assert_allclose(ue0, np.frombuffer(block, np.complex64) * 2.0, rtol=1e-3)  # +6.02 dB
    assert ue1.tobytes() == block  # -20 dB at start, 0 dB now
    for bad in ("gain 2 0", "gain 1 nan", "gain 1 -101", "gain 1 -3 extra", "cell_gain 1 -3", "gain one -3"):
        proc.stdin.write(bad + "\n")
        proc.stdin.flush()
        assert '"error"' in proc.stdout.readline() and proc.poll() is None, bad
    ue0, ue1 = _one_downlink_block(s, block)
    assert ue1.tobytes() == block  # unchanged by the refused commands


def test_broker_process_sets_a_gain_once_confirmed_and_refuses_out_of_range(broker_bin, tmp_path):
    broker = BrokerProcess(tmp_path, 2, netns=None)
    broker.start()
    try:
        broker.set_gain(1, -12.5)
        assert broker.dl_gains_db == [0.0, -12.5]
        assert '{"gain_ue":1,"dl_gain_db":-12.500}' in broker.text()
        for ue, gain in ((2, 0.0), (0, float("nan")), (0, 101.0)):
            with pytest.raises(CellabError) as err:
                broker.set_gain(ue, gain)
            assert "UE 0..1, gain -100..100 dB" in str(err.value)
        assert broker.dl_gains_db == [0.0, -12.5] and broker.rates() == []  # acks are not stats lines
        broker.set_gain(0, -7.0, link="ul")
        assert broker.ul_gains_db == [-7.0, 0.0] and broker.dl_gains_db == [0.0, -12.5]
        assert '{"gain_ue":0,"ul_gain_db":-7.000}' in broker.text()
        with pytest.raises(CellabError) as err:
            broker.set_gain(0, -7.0, link="both")
        assert "link" in str(err.value) and "dl, ul" in str(err.value)
    finally:
        broker.stop()
    with pytest.raises(CellabError, match="not running"):
        broker.set_gain(0, 0.0)


def test_uplink_is_the_sample_sum_when_blocks_differ_in_size(stack):
    s, _ = stack
    s["enb_rx"].send(b"\xff")
    s["ue0_tx"].recv()
    s["ue0_tx"].send(_samples(1, 2, 3, 4))
    s["ue1_tx"].recv()
    s["ue1_tx"].send(_samples(10j, 20j))  # the reply: the 2 samples both UEs have; UE 0's other 2 wait
    np.testing.assert_array_equal(_recv_samples(s["enb_rx"]), [1 + 10j, 2 + 20j])
    s["enb_rx"].send(b"\xff")
    s["ue1_tx"].recv()  # only the UE with nothing left is asked
    s["ue1_tx"].send(_samples(30j, 40j, 50j))
    np.testing.assert_array_equal(_recv_samples(s["enb_rx"]), [3 + 30j, 4 + 40j])
    s["enb_rx"].send(b"\xff")
    s["ue0_tx"].recv()
    s["ue0_tx"].send(_samples(5))
    np.testing.assert_array_equal(_recv_samples(s["enb_rx"]), [5 + 50j])
    with pytest.raises(zmq.Again):  # UE 1 still had a sample: not asked
        s["ue1_tx"].recv(zmq.NOBLOCK)


def test_each_ues_uplink_is_weighted_by_its_own_gain_and_the_gain_changes_while_the_stream_runs(stack):
    """A shield box attenuates a UE's uplink too: srsenb hears UE 1 (ul_gain_db -20 from stdin) at a tenth."""
    s, proc = stack
    for command, reply in (("ul_gain 1 -20", '{"gain_ue":1,"ul_gain_db":-20.000}'),
                           ("ul_gain 0 6.02", '{"gain_ue":0,"ul_gain_db":6.020}')):
        proc.stdin.write(command + "\n")
        proc.stdin.flush()
        assert proc.stdout.readline().strip() == reply
    s["enb_rx"].send(b"\xff")
    s["ue0_tx"].recv()
    s["ue0_tx"].send(_samples(1, 2j))
    s["ue1_tx"].recv()
    s["ue1_tx"].send(_samples(10j, 20))
    np.testing.assert_allclose(_recv_samples(s["enb_rx"]), [2 + 1j, 2 + 4j], rtol=1e-3)
    for bad in ("ul_gain 2 0", "ul_gain 1 inf", "ul_gain 1 101", "dl_gain 1 0", "ul_gain 1"):
        proc.stdin.write(bad + "\n")
        proc.stdin.flush()
        assert '"error"' in proc.stdout.readline() and proc.poll() is None, bad
    s["enb_rx"].send(b"\xff")  # the refused commands changed nothing; the downlink gains are not the uplink's
    s["ue0_tx"].recv()
    s["ue0_tx"].send(_samples(1))
    s["ue1_tx"].recv()
    s["ue1_tx"].send(_samples(10))
    np.testing.assert_allclose(_recv_samples(s["enb_rx"]), [3.0], rtol=1e-3)


def test_a_block_of_partial_samples_stops_it_naming_the_sender(stack):
    s, proc = stack
    s["enb_rx"].send(b"\xff")
    s["ue0_tx"].recv()
    s["ue0_tx"].send(b"\x00" * 12)
    assert proc.wait(5) == 1
    assert "sent a 12-byte block" in proc.stderr.read()


@pytest.mark.parametrize(("args", "message"), [
    (["--enb-tx", "tcp://127.0.0.1:1"], "at least one --ue"),
    (["--enb-tx", "a", "--enb-rx", "b", "--ue", "rx=a"], "needs rx=EP and tx=EP"),
    (["--enb-tx", "a", "--enb-rx", "b", "--ue", "rx=a,tx=b,dl_gain_db=106"], "dl_gain_db: a number of dB in -100..100"),
    (["--enb-tx", "a", "--enb-rx", "b", "--ue", "rx=a,tx=b,ul_gain_db=-100.5"], "ul_gain_db: a number of dB in -100..100"),
    (["--enb-tx", "a", "--enb-rx", "b", "--ue", "rx=a,tx=b,gain=1"], "allowed: rx, tx, dl_gain_db, ul_gain_db"),
    (["--bogus", "1"], "unknown option"),
])
def test_bad_arguments_exit_2_naming_the_problem(broker_bin, args, message):
    proc = subprocess.run([str(broker_bin), *args], capture_output=True, text=True, timeout=5)
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr


def test_a_taken_port_is_named(broker_bin):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        argv = broker_argv(broker_bin, 1)
        argv[argv.index("--enb-rx") + 1] = f"tcp://127.0.0.1:{port}"
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=5)
    assert proc.returncode == 1 and f"cannot bind tcp://127.0.0.1:{port}" in proc.stderr, proc.stderr


def _index_samples(first: int, count: int) -> bytes:
    """Samples whose value is their index in the stream (a UE's uplink: index = its time)."""
    return np.arange(first, first + count, dtype=np.float32).astype(np.complex64).tobytes()


def test_a_restarted_srsenb_finds_the_ues_hearing_silence_and_gets_their_uplink_from_where_its_downlink_began(
        broker_bin):
    """srsenb's connection drops with the broker's downlink request in flight (a crash): the UE hears zero blocks
    paced at the cell's rate, its uplink taken and dropped; a new srsenb on the same ports gets the request again,
    and its first uplink request gets the UE's stream from the sample its first downlink block reached."""
    enb_tx, enb_rx, ue_rx, ue_tx = _free_ports(4)
    ep = "tcp://127.0.0.1:{}".format
    argv = [str(broker_bin), "--enb-tx", ep(enb_tx), "--enb-rx", ep(enb_rx), "--stats-s", "60", "--srate-hz", "1e5",
            "--ue", f"rx={ep(ue_rx)},tx={ep(ue_tx)}"]
    ctx = zmq.Context()

    def sock(kind, endpoint, bind):
        return _stand_in_socket(ctx, kind, endpoint, bind)

    block = 100  # samples per block
    ue_sent = [0]  # the UE's uplink samples so far: each carries its index
    stop = threading.Event()
    ue_tx_sock = sock(zmq.REP, ep(ue_tx), True)
    ue_tx_sock.setsockopt(zmq.RCVTIMEO, 100)  # it checks `stop` between requests

    def ue_uplink():  # the UE's tx answers whenever the broker asks
        while not stop.is_set():
            try:
                ue_tx_sock.recv()
            except zmq.Again:
                continue
            ue_tx_sock.send(_index_samples(ue_sent[0], block // 3))  # less than a downlink block: catching up
            ue_sent[0] += block // 3                                # to srsenb's start takes several pulls

    tx1 = sock(zmq.REP, ep(enb_tx), True)
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    uplink = threading.Thread(target=ue_uplink, daemon=True)
    try:
        assert proc.stdout.readline().startswith("ready"), proc.stderr.read()
        uplink.start()
        rx1, ue = sock(zmq.REQ, ep(enb_rx), False), sock(zmq.REQ, ep(ue_rx), False)
        ue.send(b"\xff")
        assert tx1.recv() == b"\xff"
        tx1.send(_samples(*[1] * block))
        assert len(_recv_samples(ue)) == block
        rx1.send(b"\xff")
        np.testing.assert_array_equal(_recv_samples(rx1).real, np.arange(block // 3))  # sample 0 with sample 0
        ue.send(b"\xff")
        assert tx1.recv() == b"\xff"  # asked, and srsenb dies before it answers
        tx1.close()
        rx1.close()
        assert json.loads(proc.stdout.readline()) | {"wall_s": 0} == {"event": "enb_lost", "wall_s": 0,
                                                                      "dl_sample": block, "enb_losses": 1}
        heard = [_recv_samples(ue)]
        for _ in range(4):
            ue.send(b"\xff")
            heard.append(_recv_samples(ue))
        assert all(len(b) == block and not b.any() for b in heard)  # silence, block by block
        tx2 = sock(zmq.REP, ep(enb_tx), True)  # the new srsenb, on the same ports
        assert tx2.recv() == b"\xff"  # the broker asked again
        tx2.send(_samples(*[2] * block))
        got = block + sum(len(b) for b in heard)  # the UE's downlink samples before the new srsenb's first
        while True:
            ue.send(b"\xff")
            b = _recv_samples(ue)
            if b.any():
                np.testing.assert_array_equal(b, 2)
                break
            got += len(b)
        back = json.loads(proc.stdout.readline())
        assert back["event"] == "enb_back" and back["dl_sample"] == got, back
        rx2 = sock(zmq.REQ, ep(enb_rx), False)
        rx2.send(b"\xff")
        first = _recv_samples(rx2).real
        assert first[0] == back["dl_sample"] and np.all(np.diff(first) == 1), (first[:3], back)
        assert proc.poll() is None
    finally:
        stop.set()
        proc.kill()
        proc.wait()
        uplink.join(5)
        ctx.destroy(linger=0)
