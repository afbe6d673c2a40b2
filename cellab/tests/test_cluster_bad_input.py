"""Bad input to the distributed commands: each a clear error naming it, no traceback, no hang."""

from __future__ import annotations

import os
import textwrap

import pytest

from cellab.testkit.helpers import free_port, run_cellab

pytestmark = pytest.mark.shares_cpu  # no lab, but each a Dask CLI start (4 s of CPU): not beside lab tests (conftest.py)
# the tests of a scheduler that never answers name the timeout: 2 s of it, not the default 10 or 15 s
SHORT_CONNECT = os.environ | {"CELLAB_CONNECT_TIMEOUT_S": "2"}


@pytest.fixture
def campaign(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(textwrap.dedent("""
        name: c
        lab: wired
        workload: {tool: iperf3, duration_s: 2}
    """))
    return path


def _said(done) -> str:
    text = " ".join((done.stdout + done.stderr).split())
    assert "Traceback" not in text, text
    return text


@pytest.mark.parametrize("slots", ["0", "-1", "100000"])
def test_a_slot_count_out_of_range_is_refused(campaign, tmp_path, slots):
    done = run_cellab("run", str(campaign), "--slots", slots, "--out", str(tmp_path / "out"), timeout_s=60)
    said = _said(done)
    assert done.returncode == 2 and "--slots" in said and "1..64" in said, said
    assert not (tmp_path / "out").exists()  # nothing written for a refused command


def test_an_unreachable_scheduler_is_named(campaign, tmp_path):
    port = free_port()  # nobody listens there
    done = run_cellab("run", str(campaign), "--cluster", f"tcp://127.0.0.1:{port}", "--insecure", "--out",
                      str(tmp_path / "o"), "--no-report", timeout_s=120, env=SHORT_CONNECT)
    said = _said(done)
    assert done.returncode == 2 and f"127.0.0.1:{port}" in said, said


@pytest.mark.parametrize("address", ["nonsense", "http://x:1", "tcp://host:99999"])
def test_a_worker_with_a_bad_scheduler_address_is_refused(address):
    done = run_cellab("worker", "--scheduler", address, "--slots", "1", timeout_s=60)
    said = _said(done)
    assert done.returncode == 2 and "--scheduler" in said, said


def test_a_worker_whose_lab_file_is_invalid_names_it(tmp_path):
    lab = tmp_path / "lab.yaml"
    lab.write_text("name: x\ncontroller: {bind: 'not an endpoint'}\n")
    done = run_cellab("worker", "--scheduler", "tcp://127.0.0.1:1", "--insecure", "--lab", str(lab), timeout_s=60)
    said = _said(done)
    assert done.returncode == 2 and "lab.yaml" in said and "controller" in said, said


def test_a_worker_needs_lab_or_slots_not_both():
    said = _said(done := run_cellab("worker", "--scheduler", "tcp://127.0.0.1:1", "--insecure", timeout_s=60))
    assert done.returncode == 2 and "--lab/--slots" in said, said


def test_a_worker_whose_scheduler_never_answers_says_so(tmp_path):
    done = run_cellab("worker", "--scheduler", f"tcp://127.0.0.1:{free_port()}", "--insecure", "--slots", "1", timeout_s=90,
                      env=SHORT_CONNECT)
    said = _said(done)
    assert done.returncode == 2 and "did not answer within 2 s" in said, said
