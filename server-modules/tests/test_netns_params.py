"""Server-module parameters per run, not per host (issue 25): two lab instances on one host, each its own
namespaces with the same addresses, run C2TCP at the same time with their own Targets; a namespace that
set nothing gets the host-wide values; registration is shared and held per instance (root, BPF)."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from contextlib import ExitStack

import pytest
from cellab.bus.testing import lab_bus
from cellab.server import experiment, flowclient, modules
from cellab.server.agent_ops import ModuleOps

from cellab.bus import Agent

RATE_MBIT = 20
BUFFER_BYTES = 150_000
FLOW_MS = 3000


def _prefix(tag: str) -> str:
    # unique to this test process: other test runs on this host build their own labs at the same time
    return f"smt{os.getpid() % 1000}{tag}"


@pytest.fixture
def two_labs(require_root):
    """Two wired lab instances up at once (server, router with a tbf bottleneck, UE; veth between each pair),
    both with the wired lab's addresses: every UE is 10.90.2.2 in its own namespace."""
    with ExitStack() as stack:
        yield [stack.enter_context(experiment.wired_path(_prefix(t), RATE_MBIT, BUFFER_BYTES)) for t in "ab"]


def _flows_at_once(labs, tmp_path, cc="c2tcp"):
    """One timed flow per lab, all started together; each lab's own sender in its own server namespace."""
    runs: dict[int, experiment.FlowRun] = {}
    errors: list[BaseException] = []
    with ExitStack() as stack:
        senders = [stack.enter_context(experiment.sender_in(topo, tmp_path / f"logs-{i}"))
                   for i, topo in enumerate(labs)]
        start = threading.Barrier(len(labs))

        def one(i: int) -> None:
            try:
                start.wait(timeout=10)
                runs[i] = experiment.run_flow(labs[i], senders[i], cc, mode=flowclient.MODE_TIME_MS,
                                              amount=FLOW_MS, timeout_s=30)
            except BaseException as exc:  # noqa: BLE001 (reported below)
                errors.append(exc)

        threads = [threading.Thread(target=one, args=(i,)) for i in range(len(labs))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
    assert not errors, errors
    for run in runs.values():
        assert run.result.status == 0 and run.result.bytes_received > 0 and run.summary["cc"] == cc
    return [runs[i] for i in range(len(labs))]


def _only_flow(netns: str, ended: bool = False) -> dict:
    """The namespace's one c2tcp flow; `ended`: once the kernel has released its socket (the sender closes
    it after the receiver's close; its record gets end_ns then)."""
    for _ in range(100):
        flows = modules.flow_stats("c2tcp", netns=netns)
        assert len(flows) == 1, flows
        if not ended or flows[0]["end_ns"]:
            break
        time.sleep(0.05)
    return flows[0]


def test_two_instances_run_c2tcp_at_once_each_with_its_own_target(two_labs, host_clean, tmp_path):
    a, b = two_labs
    with experiment.loaded(["c2tcp"]):
        host_target = modules.describe()["c2tcp"].params["target_ms"]
        modules.set_param("c2tcp", "target_ms", 30, netns=a.server.netns)
        modules.set_param("c2tcp", "target_ms", 80, netns=b.server.netns)
        assert modules.describe(netns=a.server.netns)["c2tcp"].params["target_ms"] == 30
        assert modules.describe(netns=b.server.netns)["c2tcp"].params["target_ms"] == 80
        assert modules.describe()["c2tcp"].params["target_ms"] == host_target  # the host's value is untouched
        _flows_at_once(two_labs, tmp_path)
        fa, fb = _only_flow(a.server.netns, ended=True), _only_flow(b.server.netns, ended=True)
        listed = modules.listing()["c2tcp"]["netns_params"]
    # each flow used its own namespace's Target, though both went to the same address
    assert (fa["target_ms"], fa["target_source"]) == (30, "netns"), fa
    assert (fb["target_ms"], fb["target_source"]) == (80, "netns"), fb
    assert fa["dst"] == fb["dst"] == a.ues[0].address == b.ues[0].address
    assert fa["netns"] == a.server.netns and fb["netns"] == b.server.netns
    # at the same time: each started before the other ended
    assert fa["start_ns"] < fb["end_ns"] and fb["start_ns"] < fa["end_ns"], (fa, fb)
    assert fa["tuner_updates"] > 0 and fb["tuner_updates"] > 0  # the Tuner ran against those Targets
    assert listed[a.server.netns] == {"target_ms": 30} and listed[b.server.netns] == {"target_ms": 80}


def test_a_namespace_without_overrides_uses_the_host_values(two_labs, host_clean, tmp_path):
    a, b = two_labs
    ue = f"{a.ues[0].address}/32"  # the same address in both labs
    with experiment.loaded(["c2tcp"]):
        host = modules.describe()["c2tcp"].params
        # a's own Target, and a per-destination Target inside a (it wins over a's default)
        modules.set_param("c2tcp", "target_ms", 30, netns=a.server.netns)
        modules.set_param("c2tcp", "target_ms", 40, netns=a.server.netns, dst=ue)
        assert modules.describe(netns=b.server.netns)["c2tcp"].params == host
        _flows_at_once(two_labs, tmp_path)
        fa, fb = _only_flow(a.server.netns), _only_flow(b.server.netns)
        assert (fa["target_ms"], fa["target_source"]) == (40, "netns_dst"), fa
        # b set nothing: the host-wide Target, and a's per-destination entry for the same address is not b's
        assert (fb["target_ms"], fb["target_source"]) == (host["target_ms"], "host"), fb

        # clearing a's overrides puts a back on the host values
        modules.clear_params(a.server.netns, ["c2tcp"])
        assert modules.listing()["c2tcp"]["netns_params"] == {}
        assert modules.listing()["c2tcp"]["dst_targets"] == []
        with experiment.sender_in(a, tmp_path / "logs-again") as sender:
            again = experiment.run_flow(a, sender, "c2tcp", mode=flowclient.MODE_TIME_MS, amount=500, timeout_s=20)
        assert again.result.status == 0
        last = modules.flow_stats("c2tcp", netns=a.server.netns)[-1]
        assert (last["target_ms"], last["target_source"]) == (host["target_ms"], "host"), last


def test_a_host_wide_change_reaches_namespaces_that_did_not_set_it(two_labs, host_clean):
    """A namespace entry holds copies of the host-wide values it did not set; the loader rewrites them."""
    a, b = two_labs
    with experiment.loaded(["c2tcp"]):
        if modules.holders("c2tcp") != [f"pid-{os.getpid()}"]:
            pytest.skip("another lab instance on this host holds c2tcp: its host-wide values are not ours to change")
        before = modules.describe()["c2tcp"].params["alpha_init"]
        modules.set_param("c2tcp", "target_ms", 30, netns=a.server.netns)
        modules.set_param("c2tcp", "alpha_init", 2, netns=b.server.netns)
        try:
            modules.set_param("c2tcp", "alpha_init", 3)
            in_a = modules.describe(netns=a.server.netns)["c2tcp"].params
            in_b = modules.describe(netns=b.server.netns)["c2tcp"].params
        finally:
            modules.set_param("c2tcp", "alpha_init", before)
    assert (in_a["target_ms"], in_a["alpha_init"]) == (30, 3)  # its own Target, the host's new alpha
    assert in_b["alpha_init"] == 2  # its own alpha stays


def test_scopes_are_listed_and_a_host_scoped_parameter_refuses_a_namespace(programs, loader):
    listed = modules.describe()
    for name in modules.CC_MODULES:
        assert set(listed[name].param_scopes.values()) == {"netns"}, name
    for name in modules.TC_MODULES:
        assert set(listed[name].param_scopes.values()) == {"host"}, name
    assert set(listed["c2tcp"].param_scopes) == set(listed["c2tcp"].param_ranges)
    out = loader("set", "burst_drop", "drop_pkts", "3", "--netns", "smt-nosuch")
    assert out.returncode == 2 and "scope host" in out.stderr
    out = loader("set", "c2tcp", "target_ms", "30", "--netns", "../etc")
    assert out.returncode == 2 and "not a namespace name" in out.stderr


def test_concurrent_loads_share_one_registration_and_each_unload_lets_go_of_its_own(two_labs, host_clean, programs):
    """Two instances' agents ask for c2tcp at the same moment: one registers, the other reuses it; one
    instance unloading does not pull it from under the other."""
    a, b = two_labs
    binary = str(programs["cellab-modules"])
    others = set(modules.holders("c2tcp"))
    for _ in range(3):
        procs = [subprocess.Popen([binary, "load", "c2tcp", "--netns", topo.server.netns], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for topo in (a, b)]
        outs = [p.communicate(timeout=60) for p in procs]
        assert all(p.returncode == 0 for p in procs), outs
        said = sorted(out.strip() for out, _ in outs)
        assert said in (["c2tcp: already loaded", "c2tcp: loaded"], ["c2tcp: already loaded"] * 2), outs
        assert set(modules.holders("c2tcp")) == others | {f"netns-{a.server.netns}", f"netns-{b.server.netns}"}
        out = subprocess.run([binary, "unload", "c2tcp", "--netns", a.server.netns], capture_output=True,
                             text=True, check=True).stdout
        assert "still held by" in out and b.server.netns in out
        assert "c2tcp" in modules.available_congestion_controls()
        subprocess.run([binary, "unload", "c2tcp", "--netns", b.server.netns], capture_output=True, check=True)
        if not others:
            assert "c2tcp" not in modules.available_congestion_controls()
            assert not modules.describe()["c2tcp"].loaded


def test_an_instance_that_disappears_lets_go(two_labs, host_clean, programs, require_root):
    """A namespace holder whose namespace is gone no longer counts: the next unload unregisters."""
    a, _ = two_labs
    prefix = _prefix("c")
    with experiment.wired_path(prefix, RATE_MBIT, BUFFER_BYTES) as c:
        modules.load(["c2tcp"], netns=c.server.netns)
        modules.set_param("c2tcp", "target_ms", 70, netns=c.server.netns)
        assert f"netns-{c.server.netns}" in modules.holders("c2tcp")
    # c's namespaces are gone (a crashed instance): its hold and its parameters go with them
    modules.LOADED_BY_THIS_PROCESS.discard(("c2tcp", c.server.netns))
    modules.load(["c2tcp"], netns=a.server.netns)
    assert f"netns-{c.server.netns}" not in modules.holders("c2tcp")
    assert c.server.netns not in modules.listing()["c2tcp"]["netns_params"]
    modules.unload(["c2tcp"], netns=a.server.netns)


class _LabServerAgent(ModuleOps, Agent):
    """The server agent of one lab instance: it serves that instance's server namespace."""

    role = "server"
    netns: str | None = None


def test_the_agent_keeps_its_parameters_to_its_own_namespace(two_labs, host_clean, tmp_path):
    a, b = two_labs
    agent_cls = type("_AgentA", (_LabServerAgent,), {"netns": a.server.netns})
    with lab_bus(tmp_path, {"srv": agent_cls}) as (controller, agents):
        controller.request("srv", "load_modules", {"names": ["c2tcp"]}, timeout_s=60)
        assert f"netns-{a.server.netns}" in modules.holders("c2tcp")
        host_target = modules.describe()["c2tcp"].params["target_ms"]
        # the runner's request names no namespace: the agent scopes it to its own
        reply = controller.request("srv", "set_module_param", {"module": "c2tcp", "param": "target_ms", "value": 30})
        assert reply["netns"] == a.server.netns
        listed = {m["name"]: m for m in controller.request("srv", "list_modules")["modules"]}
        assert listed["c2tcp"]["params"]["target_ms"] == 30  # what its flows see
        assert listed["c2tcp"]["param_scopes"]["target_ms"] == "netns"
        assert modules.describe()["c2tcp"].params["target_ms"] == host_target
        # an explicit namespace is honoured
        reply = controller.request("srv", "set_module_param",
                                   {"module": "c2tcp", "param": "target_ms", "value": 80, "netns": b.server.netns})
        assert reply["netns"] == b.server.netns
        assert modules.describe(netns=b.server.netns)["c2tcp"].params["target_ms"] == 80
        modules.clear_params(b.server.netns)
        with experiment.sender_in(a, tmp_path / "logs") as sender:
            run = experiment.run_flow(a, sender, "c2tcp", mode=flowclient.MODE_TIME_MS, amount=1000, timeout_s=20)
        assert run.result.status == 0
        assert _only_flow(a.server.netns)["target_ms"] == 30
        with experiment.loaded(["c2tcp"]):  # another holder (a second instance): the module outlives the agent
            agents["srv"].safe_state()  # the session ends (or the controller is lost): the agent lets go
            assert f"netns-{a.server.netns}" not in modules.holders("c2tcp")
            assert "c2tcp" in modules.available_congestion_controls()
            # its namespace's values stay until the namespace goes (or clear): an agent that comes back after a
            # lost controller finds them where the runner set them
            assert modules.listing()["c2tcp"]["netns_params"][a.server.netns] == {"target_ms": 30}
            modules.clear_params(a.server.netns)
            assert a.server.netns not in modules.listing()["c2tcp"]["netns_params"]
