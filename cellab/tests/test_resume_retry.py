"""Issue 40: `cellab run --resume DIR --retry-failed` runs the failed runs again (before, failed counted as finished
and a resume printed `runs ok: 0, failed: 0`), and a resume of a folder a live `cellab run` holds is refused naming
the holder's pid and host (before, it sat silent)."""

from __future__ import annotations

import socket
import subprocess
import sys
import textwrap
import time

from cellab.results.store import ResultStore
from cellab.run.runner import Runner
from cellab.testkit.helpers import run_cellab


def _folder(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(textwrap.dedent("""
        name: r
        lab: wired
        factors: {cc: [cubic, bbr, reno]}
        workload: {duration_s: 1}
    """))
    runner = Runner.new(path, tmp_path / "out")
    first, second, _ = runner.store.planned()
    runner.store.start(first)
    runner.store.finish(first, "ok", metrics={"throughput_bps": 1.0})
    runner.store.start(second)
    runner.store.finish(second, "failed", error="AgentLost: agent ue2: silent for more than 5 s")
    runner.hold.release()
    return runner.store.root, [r.run_id for r in runner.store.planned()]


def test_retry_failed_makes_the_failed_runs_pending_again(tmp_path):
    root, (ok, failed, never) = _folder(tmp_path)
    assert [r.run_id for r in Runner.resume(root).store.pending()] == [never]
    runner = Runner.resume(root, retry_failed=True)
    assert [r.run_id for r in runner.store.pending()] == [failed, never]
    runner.hold.release()
    assert ResultStore.open(root).status(failed) == "failed"  # nothing written by asking


def test_retry_failed_needs_resume(tmp_path):
    result = run_cellab("run", str(tmp_path / "c.yaml"), "--retry-failed", "--no-report", timeout_s=60)
    assert result.returncode != 0 and "--retry-failed goes with --resume DIR" in result.stderr, result.stderr


def test_a_resume_of_a_folder_a_live_run_holds_is_refused_naming_it(tmp_path):
    root, _ = _folder(tmp_path)
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time\nfrom cellab.run.runner import Runner\n"
                               f"r = Runner.resume({str(root)!r})\nprint('held', flush=True)\ntime.sleep(60)\n"],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        started = time.monotonic()
        result = run_cellab("run", "--resume", str(root), "--retry-failed", "--no-report", timeout_s=60)
        took = time.monotonic() - started
    finally:
        holder.kill()
        holder.wait()
    said = result.stderr + result.stdout
    assert result.returncode != 0, said
    assert f"is held by a live `cellab run` (pid {holder.pid} on host {socket.gethostname()}" in said, said
    assert took < 20, took  # refused at once, not after waiting for a lab
    Runner.resume(root).hold.release()  # the holder gone, the folder is free again


def test_a_link_planted_at_the_holder_file_is_refused_and_not_followed(tmp_path):
    from cellab.errors import CellabError
    from cellab.results.holder import HOLDER_FILE, hold

    victim = tmp_path / "victim.txt"
    victim.write_text("a user's file\n")
    folder = tmp_path / "campaign"
    folder.mkdir()
    (folder / HOLDER_FILE).symlink_to(victim)
    try:
        hold(folder)
    except CellabError as exc:
        assert HOLDER_FILE in str(exc)
    else:
        raise AssertionError("a link at the holder file was followed")
    assert victim.read_text() == "a user's file\n"  # before: opened "a+" through the link and truncated
