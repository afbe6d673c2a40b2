"""`cellab atten emulate --pty-link FILE` never replaces or deletes what is the user's: a regular file, a folder or
a link elsewhere is refused naming the option; a missing folder is a clear error; a free name or an earlier
emulator's pty link is (re)placed and removed on exit."""

from __future__ import annotations

import os

import pytest

from attenuator.emulators.minicircuits import MiniCircuitsDevice
from cellab.errors import InputError
from cellab.testkit.helpers import run_cellab


def test_a_regular_file_is_refused_and_kept(tmp_path):
    mine = tmp_path / "notes.txt"
    mine.write_text("precious")
    with pytest.raises(InputError, match="--pty-link.*exists and is a file"):
        MiniCircuitsDevice().serve_pty(str(mine))
    assert mine.read_text() == "precious" and not mine.is_symlink()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]  # no temporary link left behind


@pytest.mark.parametrize("kind", ["folder", "link elsewhere", "missing parent", "parent is a file"])
def test_other_names_are_refused(tmp_path, kind):
    target = tmp_path / "x"
    if kind == "folder":
        target.mkdir()
    elif kind == "link elsewhere":
        (tmp_path / "data").write_text("keep")
        target.symlink_to(tmp_path / "data")
    elif kind == "missing parent":
        target = tmp_path / "no" / "x"
    else:
        (tmp_path / "f").write_text("")
        target = tmp_path / "f" / "x"
    with pytest.raises(InputError, match="--pty-link"):
        MiniCircuitsDevice().serve_pty(str(target))
    if kind == "link elsewhere":
        assert os.readlink(target) == str(tmp_path / "data") and (tmp_path / "data").read_text() == "keep"


def test_a_free_name_and_a_stale_pty_link_are_used_and_removed(tmp_path):
    link = tmp_path / "att0"
    link.symlink_to("/dev/pts/4242")  # an earlier emulator's, left behind
    server = MiniCircuitsDevice().serve_pty(str(link))
    try:
        assert os.readlink(link) == server.path and server.path.startswith("/dev/pts/")
    finally:
        server.stop()
    assert not link.exists() and not link.is_symlink()
    assert list(tmp_path.iterdir()) == []


def test_the_cli_refuses_a_regular_file_without_a_traceback(tmp_path):
    mine = tmp_path / "keep.txt"
    mine.write_text("precious")
    done = run_cellab("atten", "emulate", "minicircuits", "--pty-link", str(mine), timeout_s=60)
    said = done.stdout + done.stderr
    assert done.returncode == 2 and "--pty-link" in said and "Traceback" not in said, said
    assert mine.read_text() == "precious"
    done = run_cellab("atten", "emulate", "minicircuits", "--pty-link", str(tmp_path / "no" / "x"), timeout_s=60)
    said = done.stdout + done.stderr
    assert done.returncode == 2 and "does not exist" in said and "Traceback" not in said, said
