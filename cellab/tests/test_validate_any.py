"""`cellab validate` knows what it is given: each kind of file is checked as the command that reads it will,
and a bad one is refused naming its own fields (a core profile is no longer read as a campaign)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from cellab.testkit.helpers import cellab_in_process

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("path, says", [
    (ROOT / "core-config" / "examples" / "lab-core.yaml", "core profile: PLMN 00101"),
    (ROOT / "ran-config" / "examples" / "zmq-25prb.yaml", "eNB profile: PLMN 00101"),
    (ROOT / "runs" / "schedules" / "pedestrian.yaml", "attenuation schedule:"),
    (ROOT / "core-config" / "examples" / "subscribers.csv", "subscriber file: 2 subscribers"),
    (ROOT / "runs" / "demo" / "cc-shootout.yaml", "campaign demo-cc-shootout"),
])
def test_each_kind_is_checked_as_what_it_is(capsys, path, says):
    code, out, err = cellab_in_process(capsys, "validate", str(path))
    assert code == 0 and says in " ".join(out.split()), out + err


def test_a_bad_core_profile_names_its_own_field(capsys, tmp_path):
    data = yaml.safe_load((ROOT / "core-config" / "examples" / "lab-core.yaml").read_text())
    data["plmn"]["mcc"] = "0\u0661" + "1"  # an Arabic-Indic digit: not an ASCII PLMN
    path = tmp_path / "core.yaml"
    path.write_text(yaml.safe_dump(data, allow_unicode=True))
    code, out, err = cellab_in_process(capsys, "validate", str(path))
    said = " ".join((out + err).split())
    assert code == 2 and "plmn.mcc" in said and "Extra inputs" not in said, said


def test_a_file_of_no_known_kind_lists_the_kinds(capsys, tmp_path):
    path = tmp_path / "x.csv"
    path.write_text("a,b\n1,2\n")
    code, out, err = cellab_in_process(capsys, "validate", str(path))
    said = " ".join((out + err).split())
    assert code == 2 and "is no file cellab reads" in said and "drive log" in said, said


def test_a_drive_log_with_nan_is_refused_naming_the_row(capsys, tmp_path):
    path = tmp_path / "drive.csv"
    path.write_text("t_s,rsrp_dbm\n0,-80\n1,nan\n")
    code, out, err = cellab_in_process(capsys, "validate", str(path))
    assert code == 2 and "row 3.rsrp_dbm" in out + err
