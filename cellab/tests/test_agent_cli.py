"""`cellab agent`: a SIGTERM ends the process even when its stop cannot finish (an operation that never
returns keeps the agent's pool from draining); the grace time bounds how long it lingers."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import threading
import time

from cellab.bus.testing import make_controller, make_keys

STUCK_AGENT = textwrap.dedent("""
    import sys, threading
    from cellab import cli
    from cellab.bus import Agent, operation

    class StuckAgent(Agent):
        role = "stuck"

        @operation(concurrent=True)
        def hang(self) -> dict:
            threading.Event().wait()  # never returns
            return {}

    from cellab.contracts import registry
    cli.DEFAULT_AGENT_KIND["stuck"] = "test"
    registry.agent_class = lambda role, kind: StuckAgent
    cli.AGENT_STOP_GRACE_S = 2.0
    sys.argv = ["cellab", "agent", "--role", "stuck", *sys.argv[1:]]
    cli.app()
""")


def test_sigterm_ends_an_agent_whose_operation_never_returns(tmp_path):
    keys = make_keys(tmp_path / "keys", ["stuck1"])
    controller = make_controller(keys)
    proc = subprocess.Popen(
        [sys.executable, "-c", STUCK_AGENT, "--name", "stuck1", "--controller", controller.endpoint,
         "--key", str(keys.agents["stuck1"][1]), "--controller-key", str(keys.controller_public),
         "--artifact-dir", str(tmp_path / "artifacts")], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        controller.wait_for_agents(["stuck1"], timeout_s=20)
        # the hang request stays pending on purpose
        threading.Thread(target=_ignore, args=(controller.request, "stuck1", "hang"), daemon=True).start()
        time.sleep(0.5)
        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=15)
        assert time.monotonic() - started < 10, "the agent lingered past its grace time"
        assert code == 1, proc.stdout.read().decode() if proc.stdout else ""  # the watchdog's exit
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
        controller.close()


def _ignore(request, agent: str, op: str) -> None:
    try:
        request(agent, op, {}, timeout_s=30)
    except Exception:  # noqa: BLE001 - the agent goes away mid-request
        pass
