"""Issue 42, hostile class "attenuator options": inventory `options` of the wrong type or unknown, `cellab atten
calibrate` options (zero samples, negative settle, NaN or infinite dB, a malformed control endpoint) and
`cellab atten emulate` ports (out of range, in use) and `--pty-link` (a folder, a missing parent, the user's
regular file). Each is refused naming the option and what it allows, before any device is opened: no traceback,
nothing replaced."""

from __future__ import annotations

import socket

import pytest
import yaml

from pydantic import ValidationError

from cellab.contracts.attenuator import AttenuatorConfig
from cellab.errors import from_validation_error
from cellab.tests.test_bad_input import refused

pytestmark = pytest.mark.background  # no clock, no root


def entry(**options: object) -> dict:
    return {"name": "a1", "model": "jfw-50pa", "transport": "serial", "address": "/dev/ttyUSB9", "max_db": 95,
            "options": options}


@pytest.mark.parametrize(("options", "says"), [
    ({"baudrate": "fast"}, "options.baudrate: 'fast' (str) is refused"),
    ({"baudrate": 12345}, "options.baudrate: 12345 (int) is refused"),
    ({"baudrate": True}, "options.baudrate: True (bool) is refused"),
    ({"min_interval_s": "soon"}, "options.min_interval_s: 'soon'"),
    ({"safe_retry_s": -1}, "options.safe_retry_s: -1"),
    ({"session_wait_s": 1e308}, "options.session_wait_s"),
    ({"check_range": "no"}, "options.check_range: 'no' (str) is refused (allowed: true or false)"),
    ({"legacy_unit_db": 0}, "options.legacy_unit_db: 0"),
    ({"cell_ids": "a,b"}, "options.cell_ids: 'a,b'"),
    ({"cell_ids": "1,,2"}, "options.cell_ids"),
    ({"user": "ad\nmin"}, "options.user"),
    ({"baudrat": 9600}, "unknown option 'baudrat' (allowed: baudrate,"),
])
def test_options_of_the_wrong_type_are_refused_naming_them(capsys, tmp_path, options, says):
    path = tmp_path / "atten.yaml"
    path.write_text(yaml.safe_dump(entry(**options)))
    refused(capsys, ["atten", "info", str(path)], str(path), says)
    with pytest.raises(ValidationError) as err:  # the inventory reads the same model
        AttenuatorConfig.model_validate(entry(**options))
    assert says.split(":")[0] in str(from_validation_error("lab.yaml", err.value))


@pytest.mark.parametrize("options", [{}, {"baudrate": 9600, "check_range": False, "session_wait_s": 0.5},
                                     {"cell_ids": "1,2", "safe_retry_s": 3}, {"bank1_x_model": "AG8494H"},
                                     {"library": "/opt/vaunix/libLDAhid.so", "legacy_unit_db": 0.25}])
def test_the_options_the_drivers_read_are_accepted(options):
    assert AttenuatorConfig.model_validate(entry(**options)).options == options


@pytest.fixture
def virtual_attenuator(tmp_path):
    path = tmp_path / "virt.yaml"
    path.write_text(yaml.safe_dump({"name": "v", "model": "virtual", "transport": "zmq",
                                    "address": "tcp://127.0.0.1:9", "max_db": 95}))
    return path


@pytest.mark.parametrize(("args", "says"), [
    (["--samples", "0"], "--samples: 0"),
    (["--samples", "-3"], "--samples: -3"),
    (["--settle-s", "-1"], "--settle-s: -1.0"),
    (["--settle-s", "inf"], "--settle-s: inf"),
    (["--start-db", "nan"], "--start-db: nan: Input should be a finite number"),
    (["--stop-db", "inf"], "--stop-db: inf"),
    (["--stop-db", "-inf"], "--stop-db: -inf"),
    (["--step-db", "nan"], "--step-db: nan"),
    (["--step-db", "0"], "--step-db: 0.0"),
    (["--ue-index", "-1"], "--ue-index: -1"),
    (["--earfcn", "-5"], "--earfcn: -5"),
    (["--cell-ctl", "garbage"], "--cell-ctl: 'garbage' is not a ZeroMQ endpoint"),
    (["--cell-ctl", "tcp://127.0.0.1:99999"], "--cell-ctl: 'tcp://127.0.0.1:99999' is not a ZeroMQ endpoint"),
    (["--cell-ctl", "tcp://127.0.0.1"], "is not a ZeroMQ endpoint"),
    (["--cell-ctl", ""], "--cell-ctl: '' is not a ZeroMQ endpoint"),
])
def test_calibrate_options_are_checked_before_the_sweep(capsys, tmp_path, virtual_attenuator, args, says):
    store = tmp_path / "store"
    base = ["atten", "calibrate", str(virtual_attenuator), "--cell-ctl", "tcp://127.0.0.1:9", "--box", "b",
            "--ue", "u", "--earfcn", "1", "--store", str(store)]
    refused(capsys, [*base, *args], "cellab atten calibrate", says)
    assert not store.exists()  # nothing written


@pytest.mark.parametrize("port", ["70000", "-1", "65536"])
@pytest.mark.parametrize("vendor", [["jfw", "--transport", "telnet"], ["adaura", "--transport", "http"], ["keysight"]])
def test_emulate_ports_out_of_range_are_refused(capsys, vendor, port):
    refused(capsys, ["atten", "emulate", *vendor, "--port", port], "--port")


@pytest.mark.parametrize("vendor", [["jfw", "--transport", "telnet"], ["minicircuits", "--transport", "http"],
                                    ["keysight"]])
def test_emulate_on_a_port_in_use_is_refused(capsys, vendor):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        refused(capsys, ["atten", "emulate", *vendor, "--port", str(port)], f"--port: cannot listen on port {port}",
                "Address already in use")


@pytest.mark.parametrize("kind", ["folder", "missing parent", "regular file"])
def test_emulate_pty_link_names_that_are_not_free_are_refused(capsys, tmp_path, kind):
    target = tmp_path / "x"
    if kind == "folder":
        target.mkdir()
        (target / "inside").write_text("keep")
    elif kind == "missing parent":
        target = tmp_path / "no" / "x"
    else:
        target.write_text("precious")
    refused(capsys, ["atten", "emulate", "minicircuits", "--pty-link", str(target)], "--pty-link")
    if kind == "folder":
        assert (target / "inside").read_text() == "keep"
    elif kind == "regular file":
        assert target.read_text() == "precious" and not target.is_symlink()

