"""`cellab agent install` writes its unit without following a planted link (its temporary file has a random
name, made O_EXCL|O_NOFOLLOW; a link at the unit's name or in the folders below --root is refused) and refuses a
secret key given as the controller's public key whatever the file is called (its contents decide)."""

from __future__ import annotations

import os
import pwd
import shutil

from cellab.bus.testing import make_keys
from cellab.testkit.helpers import cellab_in_process

ME = pwd.getpwuid(os.getuid()).pw_name
UNIT = "cellab-agent-atten1.service"


def _install(capsys, keys, root, controller_key=None):
    code, out, err = cellab_in_process(
        capsys, "agent", "install", "--role", "attenuator", "--name", "atten1", "--controller", "tcp://192.0.2.1:7700",
        "--key", str(keys.agents["atten1"][1]), "--controller-key", str(controller_key or keys.controller_public),
        "--root", str(root), "--user", ME)
    assert "Traceback" not in out + err, err
    return code, " ".join(err.split())


def test_a_secret_key_named_like_a_public_one_is_refused(capsys, tmp_path):
    keys = make_keys(tmp_path / "keys", ["atten1"])
    disguised = tmp_path / "controller.key"  # a public key's name, a secret key's contents
    shutil.copy(keys.controller_secret, disguised)
    code, said = _install(capsys, keys, tmp_path / "root", disguised)
    assert code == 2 and "--controller-key" in said and "holds a secret key" in said, said
    assert not (tmp_path / "root").exists()


def test_a_link_planted_at_the_old_temporary_name_is_not_followed(capsys, tmp_path):
    keys = make_keys(tmp_path / "keys", ["atten1"])
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    units = tmp_path / "root" / "etc" / "systemd" / "system"
    units.mkdir(parents=True)
    (units / f".{UNIT}.tmp").symlink_to(victim)
    code, said = _install(capsys, keys, tmp_path / "root")
    assert code == 0, said
    assert victim.read_text() == "precious\n"
    unit = units / UNIT
    assert not unit.is_symlink() and unit.read_text().startswith("# cellab-agent-atten1")
    assert oct(unit.stat().st_mode & 0o777) == oct(0o644 & ~_umask())


def test_a_link_at_the_unit_or_in_its_folders_is_refused(capsys, tmp_path):
    keys = make_keys(tmp_path / "keys", ["atten1"])
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    units = tmp_path / "root" / "etc" / "systemd" / "system"
    units.mkdir(parents=True)
    (units / UNIT).symlink_to(victim)
    code, said = _install(capsys, keys, tmp_path / "root")
    assert code == 2 and "--root" in said and "link" in said, said
    assert victim.read_text() == "precious\n" and (units / UNIT).is_symlink()

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    root2 = tmp_path / "root2"
    root2.mkdir()
    (root2 / "etc").symlink_to(elsewhere)
    code, said = _install(capsys, keys, root2)
    assert code == 2 and "--root" in said, said
    assert list(elsewhere.iterdir()) == []


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
