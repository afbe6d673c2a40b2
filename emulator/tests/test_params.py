"""Bad input is refused with the field and the allowed values, before any namespace exists; what the parameters
turn on reaches the cell."""

from __future__ import annotations

import struct
import subprocess
from pathlib import Path

import pytest
from cellab.emulator.params import CellParams, validate_params
from cellab.emulator.ttilog import read_ttilog
from cellab.emulator.vlab import VirtualLab
from pyroute2 import netns

from cellab.errors import InputError, InputErrors
from cellab.paths import find_program


@pytest.mark.parametrize("field,value,allowed", [
    ("n_prb", 7, "6, 15, 25, 50, 75, 100"),
    ("sr_period_ms", 2, "5, 10, 20, 40, 80"),
    ("ul_policy", "fast", "srsenb, sr-strict"),
])
def test_bad_parameter_names_field_and_allowed_values(field, value, allowed):
    with pytest.raises(InputErrors) as exc:
        validate_params({field: value}, "campaign.yaml")
    text = str(exc.value)
    assert "campaign.yaml" in text and field in text and allowed in text


RLC_QUEUE_ALLOWED = '"srsenb" or a byte size 1500..1073741824'


@pytest.mark.parametrize("value", [0, -1, 1499, (1 << 30) + 1, "deep", "4194304", True, 1.5e6])
def test_bad_rlc_queue_names_field_and_allowed_values(value):
    with pytest.raises(InputErrors) as exc:
        validate_params({"rlc_queue": value}, "campaign.yaml")
    text = str(exc.value)
    assert "campaign.yaml" in text and "rlc_queue" in text and RLC_QUEUE_ALLOWED in text


def test_rlc_queue_choices_reach_the_cell():
    assert CellParams().rlc_queue == "srsenb"  # srsenb's queue unless a campaign asks for another
    argv = CellParams(rlc_queue=4194304).argv()
    assert argv[argv.index("--rlc-queue") + 1] == "bytes:4194304"
    argv = CellParams(pdcp_discard_ms=300).argv()
    assert argv[argv.index("--rlc-queue") + 1] == "srsenb" and argv[argv.index("--pdcp-discard-ms") + 1] == "300"
    # the bearer picks srsenb's discard timer: qci 7 (UM) none, qci 9 (AM) 150 ms
    for qci, discard_ms in ((7, "0"), (9, "150")):
        argv = CellParams(bearer_qci=qci).argv()
        assert argv[argv.index("--pdcp-discard-ms") + 1] == discard_ms
    with pytest.raises(InputErrors, match="bearer_qci"):
        validate_params({"bearer_qci": 5})
    with pytest.raises(InputErrors, match="pdcp_discard_ms"):  # a byte-limited queue has no discard timer
        validate_params({"rlc_queue": 100_000, "pdcp_discard_ms": 300})


def test_campaign_validation_reports_a_bad_rlc_queue_with_file_and_field(tmp_path):
    from cellab.testkit.helpers import run_cellab

    campaign = tmp_path / "queue.yaml"
    campaign.write_text("name: q\nlab: virtual\nfactors: {rlc_queue: [srsenb, 100]}\nfixed: {cc: cubic}\n"
                        "workload: {tool: iperf3, duration_s: 1}\n")
    out = run_cellab("validate", str(campaign), timeout_s=60)
    assert out.returncode != 0
    assert str(campaign) in out.stderr + out.stdout and "rlc_queue" in out.stderr + out.stdout
    assert RLC_QUEUE_ALLOWED in out.stderr + out.stdout and "Traceback" not in out.stderr


def test_bad_parameters_touch_no_namespace(netns_prefix):
    before = set(netns.listnetns())
    with pytest.raises(InputErrors):
        VirtualLab(netns_prefix, {"n_prb": 7, "n_ues": 2})
    with pytest.raises(InputErrors):
        VirtualLab(netns_prefix, {"attenuation_db": [1.0, 2.0, 3.0], "n_ues": 2})
    assert set(netns.listnetns()) == before


def test_bad_prefix_is_refused():
    with pytest.raises(InputError, match="prefix"):
        VirtualLab("Bad-Prefix!")


def test_params_argv_round_trip():
    p = CellParams(n_prb=50, sr_period_ms=40, attenuation_db=[1.5, 2.0], n_ues=2, ul_policy="sr-strict")
    argv = p.argv()
    assert argv[argv.index("--n-prb") + 1] == "50"
    assert argv[argv.index("--attenuation-db") + 1] == "1.5,2.0"
    assert argv[argv.index("--ul-policy") + 1] == "sr-strict"


@pytest.mark.parametrize("args,message", [
    (["--n-prb", "7"], "allowed: 6, 15, 25, 50, 75, 100"),
    (["--sr-period-ms", "3"], "allowed: 5, 10, 20, 40, 80"),
    (["--ul-policy", "x"], "allowed: srsenb, sr-strict"),
    (["--rlc-queue", "deep"], "allowed: srsenb, bytes:N"),
    (["--rlc-queue", "bytes:100"], "[1500, 1073741824]"),
    (["--ue", "nosuchns:lte0"], "NETNS:TUN:IPV4"),
])
def test_cell_program_rejects_bad_options_before_namespaces(args, message):
    base = ["--srv", "nosuchns-srv:lte0", "--ue", "nosuchns-ue0:lte0:10.200.1.1"]
    out = subprocess.run([str(find_program("cellab-cell")), *base, *args], capture_output=True, text=True, timeout=5, check=False)
    assert out.returncode == 2
    assert message in out.stderr
    assert "namespace" not in out.stderr  # refused before any setns


@pytest.mark.parametrize("content,rule", [
    ("5\n3\n", "monotonically nondecreasing"),
    ("0\n0\n", "nonzero amount of time"),
    ("1\nabc\n", "non-negative integer"),
])
def test_bad_trace_names_file_and_rule(tmp_path, content, rule):
    trace = tmp_path / "bad.trace"
    trace.write_text(content)
    out = subprocess.run([str(find_program("cellab-cell")), "--srv", "x-srv:lte0", "--ue", "x-ue0:lte0:10.0.0.2",
                          "--trace", str(trace)], capture_output=True, text=True, timeout=5, check=False)
    assert out.returncode == 2
    assert str(trace) in out.stderr and rule in out.stderr


def test_ttilog_reader_rejects_other_files(tmp_path):
    bad = tmp_path / "x.bin"
    bad.write_bytes(b"NOTALOG!" + bytes(40))
    with pytest.raises(InputError, match="magic"):
        read_ttilog(bad)


def test_lab_contract_for_the_runner():
    from cellab.campaign.model import params_model_for
    from cellab.labs import embedded_lab_class

    cls = embedded_lab_class("virtual")
    assert cls is VirtualLab and cls.kind == "virtual"
    model = params_model_for("virtual", "campaign.yaml")
    run = model(cc="cubic", n_prb=50, sr_period_ms=10)  # transport and cell parameters side by side
    assert run.n_prb == 50 and run.sr_period_ms == 10
    lab = VirtualLab(prefix="clx", n_prb=6)  # the session builds labs with keyword arguments
    assert lab.params.n_prb == 6


def test_cli_refuses_bad_input_with_field_and_allowed_values(netns_prefix):
    from cellab.emulator.cli import vlab_app
    from typer.testing import CliRunner

    out = CliRunner().invoke(vlab_app, ["up", "--prefix", netns_prefix, "--sr-period-ms", "7"])
    assert out.exit_code == 2
    assert "sr_period_ms" in out.output and "5, 10, 20, 40, 80" in out.output
    assert not [n for n in netns.listnetns() if n.startswith(netns_prefix)]


def test_cli_up_status_down(require_root, netns_prefix):
    from cellab.emulator.cli import vlab_app
    from typer.testing import CliRunner

    runner = CliRunner()
    try:
        up = runner.invoke(vlab_app, ["up", "--prefix", netns_prefix, "--ues", "2", "--n-prb", "6"])
        assert up.exit_code == 0, up.output
        assert f"{netns_prefix}-ue1 10.200.1.2" in up.output
        status = runner.invoke(vlab_app, ["status", "--prefix", netns_prefix])
        assert "cell: pid" in status.output and "ue1:" in status.output
    finally:
        down = runner.invoke(vlab_app, ["down", "--prefix", netns_prefix])
    assert down.exit_code == 0
    assert runner.invoke(vlab_app, ["down", "--prefix", netns_prefix]).exit_code == 0
    assert not [n for n in netns.listnetns() if n.startswith(netns_prefix + "-")]
    assert "not running" in runner.invoke(vlab_app, ["status", "--prefix", netns_prefix]).output


def _cpu_latency_us() -> int:
    with open("/dev/cpu_dma_latency", "rb") as qos:  # reading gives the value in force (int32, microseconds)
        return struct.unpack("i", qos.read(4))[0]


def test_the_cell_holds_the_cpus_awake_while_it_runs_unless_told_not_to(vlab):
    if not Path("/dev/cpu_dma_latency").exists():
        pytest.skip("this kernel has no /dev/cpu_dma_latency (PM QoS)")
    before_us = _cpu_latency_us()
    lab = vlab(n_prb=6)
    with lab.control() as ctl:
        assert ctl.stats()["cpus_awake"] is True
    assert _cpu_latency_us() == 0  # idle CPUs poll: no halted vCPU for the hypervisor to wake late
    lab.down()
    assert _cpu_latency_us() == before_us  # the cell's exit let it go
    lab = vlab(n_prb=6, cpus_awake=False)
    with lab.control() as ctl:
        assert "cpus_awake" not in ctl.stats()
    assert _cpu_latency_us() == before_us
