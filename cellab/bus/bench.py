"""Bus benchmark: request/reply latency over loopback TCP with CURVE through Controller/Agent, against
plain pyzmq REQ/REP (no CURVE, no envelope, no validation) measured in the same run.

Both servers run in their own process (as an agent does on its own host), the client side in this one;
the two are measured in alternating blocks so that both see the same load on a shared machine.
Prints one line per measurement: value, baseline, ratio, target.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import zmq

N_ROUND_TRIPS = 2000
N_WARMUP = 200
TARGET_P99_S = 0.002
TARGET_RATIO = 1.5
PAYLOAD = "x" * 64


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _serve_rep(endpoint_file: str) -> None:
    """Baseline server: echo every request on a REP socket until told 'stop'."""
    ctx = zmq.Context()
    rep = ctx.socket(zmq.REP)
    port = rep.bind_to_random_port("tcp://127.0.0.1")
    Path(endpoint_file).write_text(f"tcp://127.0.0.1:{port}")
    while True:
        msg = rep.recv()
        rep.send(msg)
        if msg == b"stop":
            break
    rep.close(linger=100)
    ctx.term()


def _wait_file(path: Path, proc: subprocess.Popen, deadline_s: float) -> str:
    while not path.exists() or not path.read_text():
        if time.monotonic() > deadline_s or proc.poll() is not None:
            raise RuntimeError("baseline REP server did not start")
        time.sleep(0.01)
    return path.read_text()


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def measure(n_round_trips: int = N_ROUND_TRIPS, block: int = 100) -> tuple[list[float], list[float]]:
    """(bus samples, baseline samples) in seconds, measured in alternating blocks of `block` round trips
    so both see the same load on a shared machine."""
    from cellab.bus.controller import Controller
    from cellab.bus.keys import generate_keypair

    deadline_s = time.monotonic() + 60
    with tempfile.TemporaryDirectory() as tmp:
        keys = Path(tmp) / "keys"
        c_pub, c_sec = generate_keypair(keys, "controller")
        a_pub, a_sec = generate_keypair(keys, "bench1")
        endpoint_file = Path(tmp) / "endpoint"
        rep_proc = subprocess.Popen([sys.executable, "-m", "cellab.bus.bench", "--serve-rep", str(endpoint_file)])
        controller = Controller("tcp://127.0.0.1:*", secret_key_file=c_sec, allowed_agent_keys=[a_pub])
        agent_proc = subprocess.Popen([sys.executable, "-m", "cellab.bus.agent_main", "--name", "bench1",
                                       "--controller", controller.endpoint, "--secret-key", str(a_sec),
                                       "--controller-key", str(c_pub), "--artifact-dir", str(Path(tmp) / "art")],
                                      stderr=subprocess.DEVNULL)
        ctx = zmq.Context()
        req = ctx.socket(zmq.REQ)
        req.linger = 0
        req.rcvtimeo = 5000
        try:
            req.connect(_wait_file(endpoint_file, rep_proc, deadline_s))
            controller.wait_for_agents(["bench1"], timeout_s=max(1.0, deadline_s - time.monotonic()))
            payload = PAYLOAD.encode()
            params = {"text": PAYLOAD}
            bus: list[float] = []
            base: list[float] = []
            perf = time.perf_counter
            for round_no in range((N_WARMUP + n_round_trips) // block):
                keep = round_no * block >= N_WARMUP
                for _ in range(block):
                    start = perf()
                    req.send(payload)
                    req.recv()
                    if keep:
                        base.append(perf() - start)
                for _ in range(block):
                    start = perf()
                    reply = controller.request("bench1", "echo", params, timeout_s=5.0)
                    if keep:
                        bus.append(perf() - start)
                if reply.get("text") != PAYLOAD:
                    raise RuntimeError(f"echo returned {reply!r}")
            req.send(b"stop")
            req.recv()
            return bus, base
        finally:
            req.close()
            ctx.term()
            _stop(rep_proc)
            _stop(agent_proc)
            controller.close()


def main() -> None:
    bus, base = measure()
    base_p50, base_p99 = statistics.median(base), _percentile(base, 0.99)
    bus_p50, bus_p99 = statistics.median(bus), _percentile(bus, 0.99)
    print(f"bus request/reply p50 (CURVE, {len(bus)} round trips): {bus_p50 * 1e3:.3f} ms; "
          f"baseline REQ/REP p50 {base_p50 * 1e3:.3f} ms; ratio {bus_p50 / base_p50:.2f}; target (none)")
    print(f"bus request/reply p99 (CURVE, {len(bus)} round trips): {bus_p99 * 1e3:.3f} ms; "
          f"baseline REQ/REP p99 {base_p99 * 1e3:.3f} ms; ratio {bus_p99 / base_p99:.2f}; "
          f"target p99 <= {TARGET_P99_S * 1e3:g} ms and ratio <= {TARGET_RATIO:g}")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--serve-rep":
        _serve_rep(sys.argv[2])
    else:
        os.environ.setdefault("PYTHONUNBUFFERED", "1")
        main()
