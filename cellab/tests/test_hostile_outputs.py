"""Issue 42, hostile class "output options": a folder option that names a file (`run --out`, `rerun --out`,
`agent install --root`, `tls DIR`), or a path through a file, `cellab tls ""` (which wrote a CA private key into
the current folder) and host names the certificate library refuses: each ends in an error naming the option,
before any work, with nothing written and the file kept."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cellab.bus.testing import make_keys
from cellab.tests.test_agent_install_paths import ME
from cellab.tests.test_bad_input import refused

pytestmark = pytest.mark.background  # no clock, no root needed by what is refused

RUNS = Path(__file__).resolve().parents[2] / "runs"


@pytest.fixture
def a_file(tmp_path: Path) -> Path:
    path = tmp_path / "notes.txt"
    path.write_text("precious")
    return path


def _kept(a_file: Path) -> None:
    assert a_file.read_text() == "precious" and sorted(p.name for p in a_file.parent.iterdir()) == ["notes.txt"]


@pytest.mark.parametrize("below", ["", "sub", "sub/deeper"])
def test_run_out_naming_a_file_is_refused(capsys, a_file, below):
    out = a_file / below if below else a_file
    refused(capsys, ["run", str(RUNS / "cc-shootout.yaml"), "--out", str(out)], "--out", "notes.txt",
            "is a file, not a folder")
    _kept(a_file)


@pytest.mark.parametrize("below", ["", "sub"])
def test_rerun_out_naming_a_file_is_refused(capsys, a_file, tmp_path, below):
    out = a_file / below if below else a_file
    refused(capsys, ["rerun", str(tmp_path / "no-such-run"), "--out", str(out)], "cellab rerun: --out",
            "is a file, not a folder")
    _kept(a_file)


@pytest.mark.parametrize("below", ["", "sub"])
def test_agent_install_root_naming_a_file_is_refused(capsys, tmp_path, a_file, below):
    keys = make_keys(tmp_path / "keys", ["atten1"])
    root = a_file / below if below else a_file
    refused(capsys, ["agent", "install", "--role", "attenuator", "--name", "atten1", "--controller",
                     "tcp://192.0.2.1:7700", "--key", str(keys.agents["atten1"][1]), "--controller-key",
                     str(keys.controller_public), "--root", str(root), "--user", ME], "--root")
    assert a_file.read_text() == "precious"


@pytest.mark.parametrize("below", ["", "sub"])
def test_tls_folder_naming_a_file_is_refused(capsys, a_file, below):
    folder = a_file / below if below else a_file
    refused(capsys, ["tls", str(folder)], "cellab tls: FOLDER", "is a file, not a folder")
    _kept(a_file)


@pytest.mark.parametrize("name", ["", " "])
def test_tls_with_an_empty_folder_name_writes_nothing(capsys, tmp_path, monkeypatch, name):
    monkeypatch.chdir(tmp_path)
    refused(capsys, ["tls", name], "cellab tls: FOLDER: an empty folder name")
    assert os.listdir(tmp_path) == []  # no CA key in the current folder


@pytest.mark.parametrize("host", ["héllo.example", "", "a b", "x\ny", "bad_host!", "*.example", "a" * 64 + ".com",
                                  ".".join(["a" * 60] * 5), "-lead.example", "trail-.example", "under_score.example"])
def test_host_names_a_certificate_cannot_hold_are_refused(capsys, tmp_path, host):
    folder = tmp_path / "certs"
    text = refused(capsys, ["tls", str(folder), "--host", "ok.example", "--host", host], "cellab tls: --host",
                   "is not a host name a certificate can name")
    if host == "héllo.example":
        assert "xn--hllo-bpa.example" in text  # its ASCII form, to use instead
    assert not folder.exists()


def test_good_host_names_and_addresses_make_certificates(capsys, tmp_path):
    from cellab.tests.test_bad_input import cellab

    code, text = cellab(capsys, "tls", str(tmp_path / "certs"), "--host", "node-1.lab.example", "--host",
                        "10.0.0.7", "--host", "::1", "--host", "xn--hllo-bpa.example")
    assert code == 0, text
    assert {"ca.pem", "ca.key", "node.pem", "node.key"} <= set(os.listdir(tmp_path / "certs"))
