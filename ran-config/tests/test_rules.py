"""The srsENB rules a profile must meet (each refused naming the file, the field and the allowed values, by
`load_profile`, so `cellab ran check` and `cellab validate lab.yaml` refuse it too), and configuration
injection: no value of an eNB profile can add a line, a key or a [section] to enb.conf, rr.conf, sib.conf or
rb.conf. Facts: srsENB 23.04 (enb_cfg_parser.cc parse_rr and set_derived_args, rrc_cell_cfg.cc, rf_zmq_imp.c),
TS 36.213 Tables 7.2.2-1A and 10.1.5-1, TS 36.101 Table 5.7.3-1, the UHD manuals' master clock rates."""

from __future__ import annotations

import configparser
import io
from pathlib import Path

import libconf
import pytest
import yaml
from typer.testing import CliRunner

from cellab.cli import app
from cellab.errors import InputError, InputErrors
from cellab.ran.profile import EnbProfile, load_profile
from cellab.ran.render import render, render_texts

pytestmark = pytest.mark.background  # no clock, no root: beside a lab test at SCHED_IDLE (conftest.py)

ROOM = Path(__file__).resolve().parents[1]
ZMQ = ROOM / "examples/zmq-25prb.yaml"
B210 = ROOM / "examples/b210-25prb.yaml"
X310 = ROOM / "examples/x310-50prb.yaml"


def _data(path: Path = ZMQ) -> dict:
    return yaml.safe_load(path.read_text())


def _write(tmp_path: Path, data: dict) -> Path:
    path = tmp_path / "enb.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _refused(tmp_path: Path, data: dict) -> str:
    path = _write(tmp_path, data)
    with pytest.raises(InputErrors) as info:
        load_profile(path)
    # the device is a tagged union: pydantic names the tag in the path (rf.device.zmq.tx_port)
    return str(info.value).replace(f"{path}: ", "").replace("rf.device.zmq.", "rf.device.").replace(
        "rf.device.uhd.", "rf.device.")


def _ok(tmp_path: Path, data: dict) -> EnbProfile:
    return load_profile(_write(tmp_path, data))


# ----- ZMQ ports and sample rate ------------------------------------------------------------------------
@pytest.mark.parametrize(("tx", "rx", "needle"), [
    ("tcp://*:0", "tcp://localhost:2001", "rf.device.tx_port: port 0 is outside 1..65535"),
    ("tcp://*:70000", "tcp://localhost:2001", "rf.device.tx_port: port 70000"),
    ("tcp://*:2000", "tcp://localhost:2000", "rf.device.rx_port: rx_port is port 2000, the same as tx_port"),
    ("tcp://*:２０００", "tcp://localhost:2001", "rf.device.tx_port"),  # full-width digits
])
def test_zmq_ports_out_of_range_or_equal(tmp_path, tx, rx, needle):
    data = _data()
    data["rf"]["device"].update(tx_port=tx, rx_port=rx)
    assert needle in _refused(tmp_path, data)


def test_zmq_ports_of_several_cells_stay_distinct_and_in_range(tmp_path):
    data = _data()
    data["rf"]["device"].update(tx_port="tcp://*:2000", rx_port="tcp://localhost:2100")
    data["cells"].append({"cell_id": 2, "tac": 7, "pci": 2, "dl_earfcn": 3350, "rf_port": 1})
    assert "tx_port of cell 1 is port 2100, the same as rx_port of cell 0" in _refused(tmp_path, data)
    data["rf"]["device"].update(tx_port="tcp://*:65500", rx_port="tcp://localhost:2001")
    assert "tx_port of cell 1 is port 65600" in _refused(tmp_path, data)


@pytest.mark.parametrize(("n_prb", "base", "good"), [
    (25, 23.04e6, True), (50, 23.04e6, True), (100, 23.04e6, True), (75, 23.04e6, False),  # 23.04/15.36 = 1.5
    (25, 5.76e6, True), (25, 3.84e6, False), (100, 11.52e6, False), (75, 30.72e6, True), (6, 1.92e6, True),
])
def test_zmq_base_rate_must_carry_the_prb_count(tmp_path, n_prb, base, good):
    data = _data()
    data["enb"]["n_prb"] = n_prb
    data["prach"]["freq_offset"] = 0 if n_prb == 6 else 4
    data["rf"]["device"]["base_srate_hz"] = base
    if good:
        assert _ok(tmp_path, data).rf.device.base_srate_hz == base
    else:
        assert "rf.device.base_srate_hz" in _refused(tmp_path, data)


def test_zmq_renders_one_channel_per_cell_so_one_port(tmp_path):
    data = _data()
    data["enb"].update(tm=2, nof_ports=2)
    assert "enb.nof_ports: the ZMQ radio is rendered with one channel per cell" in _refused(tmp_path, data)


# ----- USRP master clock --------------------------------------------------------------------------------
@pytest.mark.parametrize(("path", "clock", "needle"), [
    (B210, 20e6, "cannot serve the 25-PRB sample rate 5.76 MHz"),
    (B210, 80e6, "outside what a B2xx runs"),
    (B210, 4.608e6, "outside what a B2xx runs"),
    (X310, 150e6, "is not a master clock of a x3xx"),
    (X310, 200e6, "cannot serve the 50-PRB sample rate 11.52 MHz"),
])
def test_master_clock_that_cannot_serve_the_rate(tmp_path, path, clock, needle):
    data = _data(path)
    data["rf"]["device"]["master_clock_rate_hz"] = clock
    message = _refused(tmp_path, data)
    assert "rf.device.master_clock_rate_hz" in message and needle in message


@pytest.mark.parametrize(("path", "clock"), [(B210, 23.04e6), (B210, 46.08e6), (X310, 184.32e6)])
def test_master_clock_that_serves_the_rate(tmp_path, path, clock):
    data = _data(path)
    data["rf"]["device"]["master_clock_rate_hz"] = clock
    assert _ok(tmp_path, data).rf.device.master_clock_rate_hz == clock


def test_b2xx_two_channels_clock_limit(tmp_path):
    data = _data(B210)
    data["enb"].update(tm=2, nof_ports=2)
    data["rf"]["device"]["master_clock_rate_hz"] = 46.08e6
    assert "with 2 channel(s)" in _refused(tmp_path, data)


def test_extra_args_cannot_set_what_the_rules_check(tmp_path):
    data = _data(B210)
    data["rf"]["device"]["extra_args"] = "master_clock_rate=20e6"
    assert "rf.device.extra_args" in _refused(tmp_path, data)
    data["rf"]["device"]["extra_args"] = "fpga=usrp_b210_fpga.bin,otw_format=sc12"
    assert _ok(tmp_path, data).rf.device.extra_args


# ----- SR, CQI, scheduler ------------------------------------------------------------------------------
@pytest.mark.parametrize(("sr", "cqi", "collide"), [
    ((20, 2), (40, 2), True), ((20, 2), (40, 22), True), ((10, 3), (5, 3), True), ((20, 0), (40, 1), False),
    ((5, 1), (2, 1), True), ((5, 0), (2, 1), True),  # gcd 1: every pair meets
    ((40, 7), (40, 8), False), ((80, 79), (160, 79), True),
])
def test_sr_and_cqi_on_the_same_subframe(tmp_path, sr, cqi, collide):
    data = _data()
    data["sr"].update(period_ms=sr[0], subframe_offset=sr[1])
    data["cqi"].update(period_ms=cqi[0], subframe_offset=cqi[1])
    if collide:
        assert "cqi.subframe_offset" in _refused(tmp_path, data)
    else:
        _ok(tmp_path, data)


@pytest.mark.parametrize(("period", "offset"), [(5, 5), (10, 12), (20, 20), (40, 79)])
def test_sr_offset_beyond_its_period(tmp_path, period, offset):
    data = _data()
    data["sr"].update(period_ms=period, subframe_offset=offset)
    assert f"sr.subframe_offset: {offset} is not inside the {period} ms SR period" in _refused(tmp_path, data)


@pytest.mark.parametrize(("period", "offset"), [(2, 2), (5, 7), (32, 40)])
def test_cqi_offset_beyond_its_period(tmp_path, period, offset):
    data = _data()
    data["cqi"].update(period_ms=period, subframe_offset=offset)
    assert "cqi.subframe_offset" in _refused(tmp_path, data)


@pytest.mark.parametrize("link", ["pdsch", "pusch"])
def test_fixed_mcs_above_the_maximum(tmp_path, link):
    data = _data()
    data["scheduler"] = {f"{link}_mcs": 20, f"{link}_max_mcs": 16}
    assert f"scheduler.{link}_mcs: fixed MCS 20 is above {link}_max_mcs 16" in _refused(tmp_path, data)
    data["scheduler"] = {f"{link}_mcs": 16, f"{link}_max_mcs": 16}
    _ok(tmp_path, data)


# ----- cells, antennas, bands, PRACH --------------------------------------------------------------------
def test_two_cells_with_one_pci_and_earfcn(tmp_path):
    data = _data(B210)
    data["enb"].update(tm=1, nof_ports=1)
    data["cells"].append({"cell_id": 2, "tac": 1, "pci": 1, "dl_earfcn": 3350, "rf_port": 1})
    assert "cells[1].pci: PCI 1 on EARFCN 3350 is also cells[0]'s" in _refused(tmp_path, data)
    data["cells"][1]["pci"] = 2
    _ok(tmp_path, data)


@pytest.mark.parametrize(("tm", "ports", "good"), [(1, 1, True), (1, 2, False), (2, 1, False), (2, 2, True),
                                                   (3, 1, False), (4, 2, True)])
def test_transmission_mode_and_ports(tmp_path, tm, ports, good):
    data = _data(X310)
    data["enb"].update(tm=tm, nof_ports=ports)
    if good:
        _ok(tmp_path, data)
    else:
        assert "enb.tm" in _refused(tmp_path, data)


@pytest.mark.parametrize(("earfcn", "n_prb", "needle"), [
    (9900, 25, "is in no E-UTRA FDD band"),     # between bands 28 and 66
    (38000, 25, "is in no E-UTRA FDD band"),    # band 38 is TDD
    (2750, 25, "sticks out of band 7"),         # band 7's first EARFCN: half the carrier below the band
    (3449, 100, "sticks out of band 7"),
    (67300, 25, "sticks out of band 66's uplink"),  # DL inside 2110-2200, UL beyond 1780 MHz
])
def test_earfcn_outside_every_band_or_sticking_out(tmp_path, earfcn, n_prb, needle):
    data = _data()
    data["enb"]["n_prb"] = n_prb
    data["rf"]["device"]["base_srate_hz"] = 23.04e6
    data["cells"][0]["dl_earfcn"] = earfcn
    message = _refused(tmp_path, data)
    assert "cells[0].dl_earfcn" in message and needle in message


def test_band_66_inside_both_links(tmp_path):
    data = _data()
    data["cells"][0]["dl_earfcn"] = 66886  # 2155 MHz DL, 1745 MHz UL
    assert _ok(tmp_path, data).cells[0].dl_earfcn == 66886


@pytest.mark.parametrize(("n_prb", "offset", "good"), [(6, 0, True), (6, 1, False), (15, 4, True), (15, 9, False),
                                                       (25, 19, False), (25, 18, True), (100, 93, True),
                                                       (100, 94, False)])
def test_prach_offset_that_does_not_fit(tmp_path, n_prb, offset, good):
    data = _data()
    data["enb"]["n_prb"] = n_prb
    data["prach"]["freq_offset"] = offset
    data["rf"]["device"]["base_srate_hz"] = 23.04e6 if n_prb != 75 else 30.72e6
    if good:
        _ok(tmp_path, data)
    else:
        assert "prach.freq_offset" in _refused(tmp_path, data)


def test_cli_check_refuses_a_rule(tmp_path):
    data = _data()
    data["scheduler"] = {"pdsch_mcs": 28, "pdsch_max_mcs": 10}
    result = CliRunner().invoke(app, ["ran", "check", str(_write(tmp_path, data))])
    assert result.exit_code == 2 and "scheduler.pdsch_mcs" in result.output and "Traceback" not in result.output


# ----- configuration injection --------------------------------------------------------------------------
INI_INJECTION = "x\n[enb]\nmme_addr = 6.6.6.6"
# every string of a profile that reaches a rendered file, with the device it belongs to
TEXT_FIELDS = [(ZMQ, "name"), (ZMQ, "enb.mcc"), (ZMQ, "enb.mnc"), (ZMQ, "enb.mme_addr"), (ZMQ, "enb.gtp_bind_addr"),
               (ZMQ, "enb.s1c_bind_addr"), (ZMQ, "rf.device.tx_port"), (ZMQ, "rf.device.rx_port"),
               (ZMQ, "rf.device.id"), (B210, "rf.device.serial"), (X310, "rf.device.addr"),
               (B210, "rf.device.extra_args"), (ZMQ, "scheduler.policy_args"), (ZMQ, "report.json_filename"),
               (ZMQ, "pcap.mac_filename"), (ZMQ, "pcap.s1ap_filename"), (ZMQ, "log.filename")]


def _set(data: dict, dotted: str, value: object) -> dict:
    node = data
    *parents, last = dotted.split(".")
    for part in parents:
        node = node.setdefault(part, {})
    node[last] = value
    return data


def _unvalidated(profile: EnbProfile, dotted: str, value: str) -> EnbProfile:
    """profile with one string replaced and no validation run (model_copy does not validate)."""
    parts = dotted.split(".")
    models = [profile]
    for part in parts[:-1]:
        models.append(getattr(models[-1], part))
    new = models[-1].model_copy(update={parts[-1]: value})
    for model, part in zip(reversed(models[:-1]), reversed(parts[:-1]), strict=True):
        new = model.model_copy(update={part: new})
    return new


@pytest.mark.parametrize("payload", [INI_INJECTION, "x # y", "x,mme_addr=6.6.6.6", "fe80::1%eth0#x", 'x"; y'],
                         ids=["ini", "hash", "comma", "zone", "quote"])
@pytest.mark.parametrize(("path", "field"), TEXT_FIELDS, ids=[f for _, f in TEXT_FIELDS])
def test_profile_refuses_an_injection_in_every_text_field(tmp_path, path, field, payload):
    message = _refused(tmp_path, _set(_data(path), field, payload))
    assert message.startswith(f"{field}:") or f"\n{field}:" in message


@pytest.mark.parametrize("payload", [INI_INJECTION, "x # y", "x,mme_addr=6.6.6.6"], ids=["ini", "hash", "comma"])
@pytest.mark.parametrize(("path", "field"), TEXT_FIELDS, ids=[f for _, f in TEXT_FIELDS])
def test_renderer_refuses_an_injection_that_skipped_validation(tmp_path, path, field, payload):
    if "," in payload and not field.startswith("rf.device."):
        pytest.skip("a comma is syntax in device_args only; elsewhere in an INI value it is text")
    profile = _unvalidated(load_profile(path), field, payload)
    out = tmp_path / "out"
    with pytest.raises(InputError) as info:
        render(profile, out)
    assert info.value.source == "enb.conf" and info.value.allowed
    assert not out.exists() or not any(out.iterdir()), "a refused render wrote files"


def test_profile_name_in_comments_is_escaped():
    texts = render_texts(load_profile(ZMQ), 'evil\n[enb]\nmme_addr = 6.6.6.6\n"; x')
    ini = configparser.ConfigParser(interpolation=None)
    ini.read_string(texts["enb.conf"])
    assert ini["enb"]["mme_addr"] == "127.0.1.100" and texts["enb.conf"].splitlines().count("[enb]") == 1
    for name in ("rr.conf", "sib.conf", "rb.conf"):
        assert texts[name].splitlines()[0].startswith("// ") and "mme_addr" in texts[name].splitlines()[0]
        libconf.load(io.StringIO(texts[name]))  # still one comment line: parses


def test_examples_still_render(tmp_path):
    for path in (ZMQ, B210, X310):
        assert len(render(load_profile(path), tmp_path / path.stem)) == 4
