"""Issue 40: agents that speak. Each agent prints a start line (role, name, controller endpoint, its key's
fingerprint) and the controller logs the same line when it connects (before, only the doctor told whether an
agent had connected); `cellab agent install --dry-run` prints the unit though its service user does not exist yet."""

from __future__ import annotations

import logging
import subprocess
import sys
import time

import pytest

from cellab.bus.keys import fingerprint, load_public_key
from cellab.bus.testing import make_controller, make_keys
from cellab.testkit.helpers import cellab_in_process

NO_USER = "cellab-nouser40"


@pytest.mark.timeout(120)
def test_an_agent_says_who_it_is_and_the_controller_says_the_same(tmp_path, caplog):
    keys = make_keys(tmp_path / "keys", ["ue7"])
    controller = make_controller(keys)
    caplog.set_level(logging.INFO, logger="cellab")
    proc = subprocess.Popen(
        [sys.executable, "-m", "cellab", "agent", "--role", "ue", "--name", "ue7", "--controller", controller.endpoint,
         "--key", str(keys.agents["ue7"][1]), "--controller-key", str(keys.controller_public), "--telemetry", "off",
         "--artifact-dir", str(tmp_path / "artifacts")], stderr=subprocess.PIPE, text=True)
    try:
        controller.wait_for_agents(["ue7"], timeout_s=30)
        expected = (f"agent ue7: role ue, controller {controller.endpoint}, "
                    f"key {fingerprint(load_public_key(keys.agents['ue7'][0]))}")
        said = next(line.strip() for line in iter(proc.stderr.readline, "") if line.startswith("agent "))
        assert said == expected, said
        deadline = time.monotonic() + 10
        while expected not in caplog.text and time.monotonic() < deadline:
            time.sleep(0.1)
        assert expected in caplog.text, caplog.text
    finally:
        proc.terminate()
        proc.wait(30)
        controller.close()


def test_install_dry_run_prints_the_unit_before_its_user_exists(capsys, tmp_path):
    keys = make_keys(tmp_path / "keys", ["srv1"])
    args = ["agent", "install", "--role", "server", "--name", "srv1", "--controller", "tcp://192.0.2.1:7700",
            "--key", str(keys.agents["srv1"][1]), "--controller-key", str(keys.controller_public), "--user", NO_USER]
    code, out, err = cellab_in_process(capsys, *args, "--dry-run")
    assert code == 0 and "ExecStart=" in out and f"User={NO_USER}" in out, out + err
    assert f"user {NO_USER!r} does not exist on this host: create it with `useradd" in " ".join(err.split()), err
    code, out, err = cellab_in_process(capsys, *args)  # writing it still needs the user
    assert code == 2 and "does not exist on this host" in err and "ExecStart=" not in out, out + err
