"""Cluster addresses: tcp:// without TLS refused unless --insecure (and then said in cluster.json and the report),
malformed addresses and a TLS folder with tcp:// a clear error, and a port that accepts and never answers an
error naming the connect/handshake timeout, not a hang."""

from __future__ import annotations

import json
import os
import socket
import textwrap
import time

import pytest

from cellab.cluster.address import check_security, parse_address, probe
from cellab.errors import CellabError, InputError
from cellab.testkit.helpers import run_cellab

SHORT_CONNECT = os.environ | {"CELLAB_CONNECT_TIMEOUT_S": "2"}


def _said(done) -> str:
    text = " ".join((done.stdout + done.stderr).split())
    assert "Traceback" not in text, text
    return text


@pytest.mark.parametrize("address", ["nonsense", "http://x:1", "tcp://host:99999", "tcp://:1", "tls://h:port",
                                     "tcp://h:", "tcp://h:1/x", "tcp://a b:1", "tcp://h:\u0661", "", "tcp://h:1\0"])
def test_a_malformed_address_names_the_option(address):
    with pytest.raises(InputError) as caught:
        parse_address(address, "cellab run", "--cluster")
    assert "--cluster" in str(caught.value) and "tls://HOST:PORT" in str(caught.value)


def test_tcp_needs_insecure_and_no_tls_folder(tmp_path):
    with pytest.raises(InputError, match="--insecure"):
        check_security("tcp://127.0.0.1:8786", None, False, "cellab run", "--cluster")
    with pytest.raises(InputError, match="--tls.*tcp://"):
        check_security("tcp://127.0.0.1:8786", tmp_path, True, "cellab run", "--cluster")
    with pytest.raises(InputError, match="needs certificates"):
        check_security("tls://127.0.0.1:8786", None, False, "cellab run", "--cluster")
    assert check_security("tcp://127.0.0.1:8786", None, True, "cellab run", "--cluster") == "tcp"
    assert check_security("tls://[::1]:8786", tmp_path, False, "cellab worker", "--scheduler") == "tls"


def test_a_port_that_never_answers_is_an_error_within_the_bound():
    with socket.socket() as silent:  # listens (the kernel accepts connections), never says anything
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        port = silent.getsockname()[1]
        started = time.monotonic()
        with pytest.raises(CellabError) as caught:
            probe(f"tcp://127.0.0.1:{port}", None, 0.5)
        assert time.monotonic() - started < 5
    said = str(caught.value)
    assert "within 0.5 s" in said and "CELLAB_CONNECT_TIMEOUT_S" in said, said


@pytest.fixture
def campaign(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(textwrap.dedent("""
        name: c
        lab: wired
        workload: {tool: iperf3, duration_s: 2}
    """))
    return path


def test_run_refuses_tcp_without_insecure_and_writes_nothing(campaign, tmp_path):
    done = run_cellab("run", str(campaign), "--cluster", "tcp://127.0.0.1:8786", "--out", str(tmp_path / "o"),
                      "--no-report", timeout_s=60)
    said = _said(done)
    assert done.returncode == 2 and "--insecure" in said and "tls://" in said, said
    assert not (tmp_path / "o").exists()


def test_run_with_a_tls_folder_and_tcp_is_refused(campaign, tmp_path):
    done = run_cellab("run", str(campaign), "--cluster", "tcp://127.0.0.1:8786", "--tls", str(tmp_path),
                      "--insecure", "--out", str(tmp_path / "o"), "--no-report", timeout_s=60)
    said = _said(done)
    assert done.returncode == 2 and "--tls" in said and "tcp://" in said, said


def test_run_against_a_silent_port_ends_naming_the_timeout(campaign, tmp_path):
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        port = silent.getsockname()[1]
        started = time.monotonic()
        done = run_cellab("run", str(campaign), "--cluster", f"tcp://127.0.0.1:{port}", "--insecure", "--out",
                          str(tmp_path / "o"), "--no-report", timeout_s=60, env=SHORT_CONNECT)
        took = time.monotonic() - started
    said = _said(done)
    assert done.returncode == 2 and "within 2 s" in said and f"127.0.0.1:{port}" in said, said
    assert took < 30, took


def test_a_worker_refuses_tcp_without_insecure():
    done = run_cellab("worker", "--scheduler", "tcp://127.0.0.1:1", "--slots", "1", timeout_s=60)
    said = _said(done)
    assert done.returncode == 2 and "--insecure" in said, said


def test_the_report_says_the_cluster_was_insecure(tmp_path):
    from cellab.report.page import _insecure

    assert _insecure(tmp_path) == ""
    (tmp_path / "cluster.json").write_text(json.dumps({"address": "tcp://h:1", "insecure": True}))
    assert "without TLS" in _insecure(tmp_path) and "tcp://h:1" in _insecure(tmp_path)
    (tmp_path / "cluster.json").write_text("[1]")
    assert _insecure(tmp_path) == ""
