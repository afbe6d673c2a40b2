"""Bus benchmark: request/reply latency over loopback TCP with CURVE through Controller/Agent, against
plain pyzmq REQ/REP (no CURVE, no envelope, no validation) measured in the same run.

Both servers run in their own process (as an agent does on its own host), the client side in this one.
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


def _baseline(deadline_s: float) -> list[float]:
    with tempfile.TemporaryDirectory() as tmp:
        endpoint_file = Path(tmp) / "endpoint"
        proc = subprocess.Popen([sys.executable, "-m", "cellab.bus.bench", "--serve-rep", str(endpoint_file)])
        try:
            while not endpoint_file.exists() or not endpoint_file.read_text():
                if time.monotonic() > deadline_s or proc.poll() is not None:
                    raise RuntimeError("baseline REP server did not start")
                time.sleep(0.01)
            ctx = zmq.Context()
            req = ctx.socket(zmq.REQ)
            req.linger = 0
            req.rcvtimeo = 5000
            req.connect(endpoint_file.read_text())
            payload = PAYLOAD.encode()
            samples = []
            for i in range(N_WARMUP + N_ROUND_TRIPS):
                start = time.perf_counter()
                req.send(payload)
                req.recv()
                if i >= N_WARMUP:
                    samples.append(time.perf_counter() - start)
            req.send(b"stop")
            req.recv()
            req.close()
            ctx.term()
            proc.wait(timeout=5)
            return samples
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def _bus(deadline_s: float) -> list[float]:
    from cellab.bus.controller import Controller
    from cellab.bus.keys import generate_keypair

    with tempfile.TemporaryDirectory() as tmp:
        keys = Path(tmp) / "keys"
        c_pub, c_sec = generate_keypair(keys, "controller")
        a_pub, a_sec = generate_keypair(keys, "bench1")
        controller = Controller("tcp://127.0.0.1:*", secret_key_file=c_sec, allowed_agent_keys=[a_pub])
        proc = subprocess.Popen([sys.executable, "-m", "cellab.bus.agent_main", "--name", "bench1",
                                 "--controller", controller.endpoint, "--secret-key", str(a_sec),
                                 "--controller-key", str(c_pub), "--artifact-dir", str(Path(tmp) / "art")],
                                stderr=subprocess.DEVNULL)
        try:
            controller.wait_for_agents(["bench1"], timeout_s=max(1.0, deadline_s - time.monotonic()))
            params = {"text": PAYLOAD}
            samples = []
            for i in range(N_WARMUP + N_ROUND_TRIPS):
                start = time.perf_counter()
                reply = controller.request("bench1", "echo", params, timeout_s=5.0)
                if i >= N_WARMUP:
                    samples.append(time.perf_counter() - start)
            if reply.get("text") != PAYLOAD:
                raise RuntimeError(f"echo returned {reply!r}")
            return samples
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            controller.close()


def main() -> None:
    deadline_s = time.monotonic() + 120
    base = _baseline(deadline_s)
    bus = _bus(deadline_s)
    base_p50, base_p99 = statistics.median(base), _percentile(base, 0.99)
    bus_p50, bus_p99 = statistics.median(bus), _percentile(bus, 0.99)
    print(f"bus p50 request/reply (CURVE, {N_ROUND_TRIPS} round trips): {bus_p50 * 1e3:.3f} ms; "
          f"baseline REQ/REP p50 {base_p50 * 1e3:.3f} ms; ratio {bus_p50 / base_p50:.2f}; target (none)")
    print(f"bus p99 request/reply (CURVE, {N_ROUND_TRIPS} round trips): {bus_p99 * 1e3:.3f} ms; "
          f"baseline REQ/REP p99 {base_p99 * 1e3:.3f} ms; ratio {bus_p99 / base_p99:.2f}; "
          f"target p99 <= {TARGET_P99_S * 1e3:g} ms and ratio <= {TARGET_RATIO:g}")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--serve-rep":
        _serve_rep(sys.argv[2])
    else:
        os.environ.setdefault("PYTHONUNBUFFERED", "1")
        main()
