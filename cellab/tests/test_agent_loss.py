"""Issue 40: what a campaign says and does when an inventory's agent is lost: the agent, its host and the command
that starts it again (from the inventory), a wait without a timeout that reminds, and the campaign's choice
(`on_agent_loss: pause|stop`) validated like any field."""

from __future__ import annotations

import shlex
from types import SimpleNamespace
import textwrap

import pytest
import yaml

from cellab.campaign.load import load_campaign
from cellab.errors import InputErrors
from cellab.inventory.model import load_inventory
from cellab.run.agent_loss import AGENT_KEY_DIR, loss_message, start_command, wait_until_back
from cellab.testkit.helpers import write_lab


def test_the_restart_command_is_the_agents_start_line_from_the_inventory(tmp_path):
    lab = write_lab(tmp_path, 7700, 7801, ues=2)  # telemetry not at port + 1: the command must say it
    argv = start_command(load_inventory(lab), "ue2")
    assert argv == ["cellab", "agent", "--role", "ue", "--name", "ue2", "--controller", "tcp://127.0.0.1:7700",
                    "--telemetry", "tcp://127.0.0.1:7801", "--key", str(tmp_path / "keys" / "ue2.key_secret"),
                    "--controller-key", str(tmp_path / "keys" / "controller.key")]


def test_a_wildcard_bind_is_dialled_at_this_hosts_address_and_keys_are_where_the_docs_keep_them(tmp_path):
    lab = write_lab(tmp_path, 7700, 7701)
    data = yaml.safe_load(lab.read_text())
    data["controller"] |= {"bind": "tcp://0.0.0.0:7700", "telemetry_bind": "tcp://0.0.0.0:7701"}
    data["devices"]["ues"][0] |= {"kind": "android", "serial": "2A191FDH3001JD"}
    lab.write_text(yaml.safe_dump(data))
    (tmp_path / "keys" / "ue1.key_secret").unlink()  # the secret key lives on the agent's host only
    argv = start_command(load_inventory(lab), "ue1")
    assert argv[argv.index("--controller") + 1] == "tcp://127.0.0.1:7700"  # the route to its host (loopback)
    assert "--telemetry" not in argv  # port + 1: the agent's default
    assert argv[argv.index("--key") + 1] == str(AGENT_KEY_DIR / "ue1.key_secret")
    assert argv[argv.index("--controller-key") + 1] == str(AGENT_KEY_DIR / "controller.key")
    assert argv[-4:] == ["--kind", "android", "--serial", "2A191FDH3001JD"]


def test_the_options_an_agent_said_complete_the_command_and_a_phone_keeps_its_inventory_serial(tmp_path):
    lab = write_lab(tmp_path, 7700, 7701)
    data = yaml.safe_load(lab.read_text())
    data["devices"]["ues"][0] |= {"kind": "android", "serial": "2A191FDH3001JD"}
    lab.write_text(yaml.safe_dump(data))
    said = {"serial": "other", "adb_port": "5038", "netns": "ns1", "artifact_dir": "/srv/cellab a"}
    argv = start_command(load_inventory(lab), "ue1", said)
    assert argv[argv.index("--controller-key") + 2:] == ["--kind", "android", "--serial", "2A191FDH3001JD",
                                                         "--adb-port", "5038", "--netns", "ns1", "--artifact-dir",
                                                         "/srv/cellab a"]
    text = loss_message(load_inventory(lab), ["ue1"], "pause", tmp_path / "out", {"ue1": said})
    assert "--artifact-dir '/srv/cellab a'" in text  # quoted for the shell it is pasted into
    older = loss_message(load_inventory(lab), ["ue1"], "pause", tmp_path / "out", {"ue1": None})
    assert "its hello said no options (an older agent)" in older


@pytest.mark.parametrize("action", ["pause", "stop"])
def test_the_message_names_agent_host_command_and_what_the_campaign_does(tmp_path, action):
    inventory = load_inventory(write_lab(tmp_path, 7700, 7701, ues=2))
    text = loss_message(inventory, ["ue2"], action, tmp_path / "out" / "c-1")
    assert "agent ue2 (role ue) on host laptop (127.0.0.1) is lost" in text
    assert shlex.join(start_command(inventory, "ue2")) in text
    assert f"--resume {tmp_path / 'out' / 'c-1'} --retry-failed" in text
    assert ("pauses and goes on by itself" in text) == (action == "pause")
    assert ("the campaign stops" in text) == (action == "stop")


def test_the_wait_has_no_timeout_and_reminds_every_interval():
    now = [0.0]
    answers = iter([["ue2"]] * 30 + [[]])  # back after 30 polls of 1 s

    def sleep(seconds):
        now[0] += seconds

    said: list[str] = []
    waited = wait_until_back(lambda: next(answers), said.append, reminder_s=10, sleep=sleep, clock=lambda: now[0])
    reminders = [s for s in said if s.startswith("still waiting for agent ue2")]
    assert reminders[0].startswith("still waiting for agent ue2 (paused 10 s)"), said
    assert len(reminders) == 2, said  # at 10 and 20 s; at 30 s it answers
    assert said[-1].startswith("agents back after 30 s") and waited == 30


def test_on_agent_loss_takes_pause_or_stop_and_names_the_allowed_values(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(textwrap.dedent("""
        name: c
        lab: wired
        on_agent_loss: wait
    """))
    with pytest.raises(InputErrors) as caught:
        load_campaign(path)
    said = str(caught.value)
    assert "on_agent_loss" in said and "pause" in said and "stop" in said and str(path) in said
    path.write_text("name: c\nlab: wired\n")
    assert load_campaign(path).on_agent_loss == "pause"


@pytest.mark.parametrize("action", ["pause", "stop"])
def test_the_runner_pauses_until_the_agent_is_back_or_stops_the_campaign(tmp_path, action):
    import io

    from rich.console import Console

    from cellab.bus.liveness import AgentStatus
    from cellab.inventory.lab import InventoryLab
    from cellab.run.agent_loss import CampaignStopped
    from cellab.run.runner import Runner

    lab = write_lab(tmp_path, 7700, 7701, ues=2)
    (tmp_path / "c.yaml").write_text(f"name: c\nlab: lab.yaml\non_agent_loss: {action}\n")
    out = io.StringIO()
    runner = Runner.new(tmp_path / "c.yaml", tmp_path / "out", console=Console(file=out, width=400))
    answers = iter([["ue2"], ["ue2"], []])
    # ue2's last hello said the host-only options it was started with: the printed command has them
    said = {"ue2": AgentStatus(name="ue2", role="ue", version="1", last_seen=0.0, lost=True, host="bench2",
                               start_options={"netns": "lab-ue2", "cell_ctl": "tcp://10.0.0.9:7000", "cell_ue": "1"})}
    session = SimpleNamespace(lab=InventoryLab(load_inventory(lab), None, []), lost_agents=lambda: next(answers),
                              controller=SimpleNamespace(agents=lambda: said))
    try:
        if action == "stop":
            with pytest.raises(CampaignStopped) as caught:
                runner._agents_back(session)
            said = str(caught.value)
            assert next(answers) == ["ue2"]  # asked once: no wait
        else:
            runner._agents_back(session)  # returns once the agent answers
            said = out.getvalue()
            assert "agents back after" in said
    finally:
        runner.hold.release()
    assert "agent ue2 (role ue) on host laptop (127.0.0.1) is lost" in said
    assert "--netns lab-ue2 --cell-ctl tcp://10.0.0.9:7000 --cell-ue 1\n" in said, said
    assert "its host's options as its hello said them" in said
    assert f"cellab run --resume {runner.store.root}" in said
