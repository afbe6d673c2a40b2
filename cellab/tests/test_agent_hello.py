"""Issue 40: an agent's hello says its host and the host-only options it was started with (checked on both sides,
only ever printed); `cellab run` says each agent's connection (and its return) in one line: role, name, host, key
fingerprint (cellab.run.connect_lines)."""

from __future__ import annotations

import json
import socket
import time

import pytest

from cellab.bus.demo import DemoAgent
from cellab.bus.testing import RawAgent, lab_bus, make_agent, make_controller, make_keys
from cellab.errors import InputError
from cellab.run.connect_lines import ConnectLines

OPTIONS = {"netns": "lab-ue1", "cell_ctl": "tcp://10.0.0.1:7000", "cell_ue": "1", "artifact_dir": "/srv/a b"}


def _until(predicate, timeout_s: float = 10.0):
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "not within the time"
        time.sleep(0.05)


def test_the_hello_carries_host_and_options_and_run_says_each_connection(tmp_path):
    said: list[str] = []
    keys = make_keys(tmp_path / "keys", ["ue1"])
    controller = make_controller(keys)
    try:
        with ConnectLines(said.append):
            agent = make_agent(DemoAgent, "ue1", controller, keys, artifact_dir=tmp_path / "a")
            agent.set_start_options(OPTIONS | {"serial": None})  # an option not given is left out
            agent.start()
            controller.wait_for_agents(["ue1"], timeout_s=10)
            _until(lambda: said)
            status = controller.agents()["ue1"]
            assert status.host == socket.gethostname() and status.start_options == OPTIONS
            assert said[0] == (f"agent ue1 connected: role demo, host {socket.gethostname()} (127.0.0.1), key "
                               f"{agent.key_fingerprint}"), said
            time.sleep(0.5)
            assert len(said) == 1, said  # a hello before and after the handshake: one connection, one line
            agent.stop()  # lost, then back: said again
            _until(lambda: controller.agents()["ue1"].lost)
            again = make_agent(DemoAgent, "ue1", controller, keys, artifact_dir=tmp_path / "a")
            again.start()
            _until(lambda: len(said) > 1)
            assert said[1].startswith("agent ue1 connected again: role demo, host "), said
            again.stop()
    finally:
        controller.close()


def test_an_agent_refuses_options_it_cannot_say(tmp_path):
    with lab_bus(tmp_path, {"ue1": DemoAgent}) as (_, agents):
        for options in ({"evil": "rm -rf /"}, {"netns": "a\nb"}, {"netns": ""}, {"cell_ue": 1}):
            with pytest.raises(InputError) as caught:
                agents["ue1"].set_start_options(options)
            assert "start_options" in str(caught.value), options
        assert agents["ue1"].start_options == {}


def test_the_controller_keeps_only_checked_host_and_options(tmp_path):
    with lab_bus(tmp_path, {"ue2": DemoAgent}) as (controller, _):
        keys = make_keys(tmp_path / "raw", ["ue1"])
        raw_controller = make_controller(keys)
        raw = RawAgent(keys, "ue1", raw_controller)
        try:
            hello = {"version": 1, "kind": "hello", "role": "ue", "host": "bad host; rm",
                     "start_options": {"netns": "lab-ue1", "evil": "x", "cell_ctl": "a\nb", "cell_ue": 3}}
            raw.send([json.dumps(hello).encode(), b""])
            raw_controller.wait_for_agents(["ue1"], timeout_s=10)
            status = raw_controller.agents()["ue1"]
            assert status.host is None and status.start_options == {"netns": "lab-ue1"}
            raw.send([json.dumps({"version": 1, "kind": "hello", "role": "ue"}).encode(), b""])  # an older agent's
            _until(lambda: raw_controller.agents()["ue1"].start_options is None)  # says none: not "none given"
            assert controller.agents()["ue2"].host == socket.gethostname()  # an honest agent beside it
        finally:
            raw.close()
            raw_controller.close()
