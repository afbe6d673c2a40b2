"""Issue 42, hostile class "calibrations that cannot be right": huge residuals, points that rise and fall, duplicate
JSON keys, stated residuals the points contradict. Each is refused by `cellab validate` (and every reader of a
calibration file) naming the file and the field; a consistent calibration still validates."""

from __future__ import annotations

import json

import pytest

from attenuator.calibration import CalibrationError, SweepPoint, fit, load_calibration
from cellab.errors import InputError, InputErrors
from cellab.tests.test_bad_input import cellab, refused

pytestmark = pytest.mark.background  # no clock, no root


def calibration(**changes: object) -> dict:
    """A calibration whose numbers agree: three points on RSRP = -50 - 1.0 * dB, residuals 0."""
    data = {"shield_box": "box1", "ue": "ue1", "earfcn": 3350, "a_dbm": -50.0, "b_db_per_db": 1.0,
            "residual_rms_db": 0.0, "max_residual_db": 0.0, "min_db": 0.0, "max_db": 60.0,
            "points": [{"db": d, "rsrp_dbm": -50.0 - d, "samples": 3} for d in (0.0, 30.0, 60.0)]}
    data.update(changes)
    return data


def test_a_consistent_calibration_validates(capsys, tmp_path):
    path = tmp_path / "cal.json"
    path.write_text(json.dumps(calibration()))
    code, text = cellab(capsys, "validate", str(path))
    assert code == 0, text
    assert load_calibration(path).b_db_per_db == 1.0


@pytest.mark.parametrize(("changes", "says"), [
    ({"residual_rms_db": 500.0, "max_residual_db": 900.0}, "residual_rms_db: 500.0 dB outside [0, 1.5]"),
    ({"residual_rms_db": -1.0}, "residual_rms_db: -1.0 dB outside"),
    ({"residual_rms_db": 0.5, "max_residual_db": 0.1, "points": []}, "max_residual_db: 0.1 dB outside"),
    ({"residual_rms_db": 0.2, "max_residual_db": 1e6, "points": []}, "max_residual_db: 1000000.0 dB outside"),
    ({"points": [{"db": 0, "rsrp_dbm": -20, "samples": 1}, {"db": 30, "rsrp_dbm": -60, "samples": 1},
                 {"db": 60, "rsrp_dbm": -130, "samples": 1}]}, "points: their residuals"),
])
def test_huge_or_contradicted_residuals_are_refused(capsys, tmp_path, changes, says):
    path = tmp_path / "cal.json"
    path.write_text(json.dumps(calibration(**changes)))
    refused(capsys, ["validate", str(path)], str(path), says)


@pytest.mark.parametrize("rsrp", [[-60, -50, -110], [-60, -100, -70], [-50, -120, -45.5]])
def test_points_that_rise_and_fall_are_refused(capsys, tmp_path, rsrp):
    points = [{"db": d, "rsrp_dbm": r, "samples": 3} for d, r in zip((0.0, 30.0, 60.0), rsrp, strict=True)]
    path = tmp_path / "cal.json"
    path.write_text(json.dumps(calibration(points=points)))
    refused(capsys, ["validate", str(path)], str(path), "points: RSRP rises")
    # a sweep with one such rise is refused the same way, though its residuals alone would pass
    sweep = [SweepPoint(db=d, rsrp_dbm=-50.0 - d + (4.5 if d == 46 else 0.0), samples=1) for d in range(61)]
    with pytest.raises(CalibrationError, match=r"RSRP rises from -95.0 dBm at 45.0 dB to -91.5 dBm at 46.0 dB"):
        fit(sweep, "b", "u", 1)


@pytest.mark.parametrize("key", ["a_dbm", "b_db_per_db", "points"])
def test_duplicate_json_keys_are_refused(capsys, tmp_path, key):
    text = json.dumps(calibration())
    value = json.dumps(calibration()[key])
    text = text.replace(f'"{key}": ', f'"{key}": {value}, "{key}": ', 1)  # the key twice, the same value
    path = tmp_path / "cal.json"
    path.write_text(text)
    refused(capsys, ["validate", str(path)], str(path), f"{key}: duplicate key")
    with pytest.raises((InputError, InputErrors), match="duplicate key"):
        load_calibration(path)


def test_a_duplicate_key_inside_a_point_is_refused(tmp_path):
    path = tmp_path / "cal.json"
    path.write_text(json.dumps(calibration()).replace('"samples": 3', '"samples": 3, "samples": 4', 1))
    with pytest.raises(InputError, match="samples: duplicate key"):
        load_calibration(path)
