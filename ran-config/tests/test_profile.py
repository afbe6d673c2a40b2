"""Profiles: every example renders, parses back (configparser, libconf) to the profile's values, matches its
golden files; every invalid value fails naming the file, the field and the allowed values."""

from __future__ import annotations

import configparser
import io
import os
from pathlib import Path

import libconf
import pytest
import yaml
from typer.testing import CliRunner

from cellab.cli import app
from cellab.contracts.identity import NetworkIdentity
from cellab.errors import InputErrors
from cellab.ran.bands import carrier
from cellab.ran.profile import load_profile, network_identity
from cellab.ran.render import render, render_texts

ROOM = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((ROOM / "examples").glob("*.yaml"))
GOLDEN = Path(__file__).parent / "golden"


def _ini(text: str) -> configparser.ConfigParser:
    ini = configparser.ConfigParser(interpolation=None, inline_comment_prefixes=None)
    ini.read_string(text)
    return ini


def _libconf(text: str) -> dict:
    return libconf.load(io.StringIO(text))


def test_there_are_the_three_examples():
    assert {p.stem for p in EXAMPLES} == {"b210-25prb", "x310-50prb", "zmq-25prb"}


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_example_renders_and_parses_back(path: Path, tmp_path: Path):
    prof = load_profile(path)
    written = render(prof, tmp_path, path.name)
    assert sorted(p.name for p in written) == ["enb.conf", "rb.conf", "rr.conf", "sib.conf"]

    enb = _ini((tmp_path / "enb.conf").read_text())
    assert enb["enb"]["mcc"] == prof.enb.mcc and enb["enb"]["mnc"] == prof.enb.mnc
    assert int(enb["enb"]["n_prb"]) == prof.enb.n_prb
    assert int(enb["enb"]["enb_id"], 16) == prof.enb.enb_id
    assert enb["enb"]["mme_addr"] == prof.enb.mme_addr
    assert float(enb["rf"]["tx_gain"]) == prof.rf.tx_gain_db and float(enb["rf"]["rx_gain"]) == prof.rf.rx_gain_db
    assert enb["rf"]["device_name"].lower() == prof.rf.device.kind
    assert enb["expert"]["report_json_enable"] == "true"  # on by default
    assert enb["scheduler"]["policy"] == prof.scheduler.policy
    assert int(enb["scheduler"]["pusch_max_mcs"]) == prof.scheduler.pusch_max_mcs
    assert enb["pcap"]["enable"] == ("true" if prof.pcap.mac_enable else "false")
    assert {enb["enb_files"][k] for k in ("sib_config", "rr_config", "rb_config")} == {"sib.conf", "rr.conf", "rb.conf"}

    rr = _libconf((tmp_path / "rr.conf").read_text())
    sr = rr["phy_cnfg"]["sched_request_cnfg"]
    assert (sr["period"], sr["dsr_trans_max"], sr["nof_prb"]) == (prof.sr.period_ms, prof.sr.dsr_trans_max, prof.sr.nof_prb)
    assert rr["phy_cnfg"]["cqi_report_cnfg"]["period"] == prof.cqi.period_ms
    cells = rr["cell_list"]
    assert len(cells) == len(prof.cells)
    for got, want in zip(cells, prof.cells, strict=True):
        assert (got["cell_id"], got["tac"], got["pci"], got["dl_earfcn"], got["rf_port"]) == (
            want.cell_id, want.tac, want.pci, want.dl_earfcn, want.rf_port)

    sib = _libconf((tmp_path / "sib.conf").read_text())
    prach = sib["sib2"]["rr_config_common_sib"]["prach_cnfg"]
    assert prach["prach_cnfg_info"]["prach_freq_offset"] == prof.prach.freq_offset
    assert prach["root_sequence_index"] == prof.prach.root_sequence_index
    assert sib["sib2"]["rr_config_common_sib"]["pucch_cnfg"]["n_rb_cqi"] == prof.pucch.n_rb_cqi

    rb = _libconf((tmp_path / "rb.conf").read_text())
    assert [q["qci"] for q in rb["qci_config"]] == [7, 9]


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_example_matches_golden(path: Path):
    texts = render_texts(load_profile(path), path.name)
    folder = GOLDEN / path.stem
    if os.environ.get("UPDATE_GOLDEN"):
        folder.mkdir(parents=True, exist_ok=True)
        for name, text in texts.items():
            (folder / name).write_text(text)
    for name, text in texts.items():
        assert (folder / name).read_text() == text, f"{folder / name} differs (UPDATE_GOLDEN=1 to accept)"


def test_uhd_device_args_per_family():
    b210 = _ini(render_texts(load_profile(ROOM / "examples/b210-25prb.yaml"))["enb.conf"])["rf"]
    assert b210["device_name"] == "UHD"
    args = dict(kv.split("=") for kv in b210["device_args"].split(","))
    assert args["type"] == "b200" and args["serial"] == "3218C8E" and args["clock"] == "external"
    assert float(args["master_clock_rate"]) % 5.76e6 == 0  # an integer multiple of the 25-PRB sample rate
    assert args["num_recv_frames"] == "64"
    x310 = dict(kv.split("=") for kv in _ini(render_texts(load_profile(ROOM / "examples/x310-50prb.yaml"))
                                             ["enb.conf"])["rf"]["device_args"].split(","))
    assert x310["type"] == "x300" and x310["addr"] == "192.168.40.2" and x310["clock"] == "gpsdo"
    assert x310["master_clock_rate"] == "184.32e6"


def _write(tmp_path: Path, data: dict, name: str = "enb.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data))
    return path


def _base() -> dict:
    return yaml.safe_load((ROOM / "examples/zmq-25prb.yaml").read_text())


def _errors(path: Path) -> str:
    with pytest.raises(InputErrors) as info:
        load_profile(path)
    return str(info.value)


@pytest.mark.parametrize(("change", "field", "allowed"), [
    (lambda d: d["sr"].update(period_ms=7), "sr.period_ms", "allowed: 5, 10, 20, 40, 80"),
    (lambda d: d["enb"].update(n_prb=30), "enb.n_prb", "allowed: 6, 15, 25, 50, 75, 100"),
    (lambda d: d["prach"].update(freq_offset=0), "prach.freq_offset", "allowed: 1..18"),
    (lambda d: d["cells"][0].update(dl_earfcn=9900), "cells[0].dl_earfcn", "band 7: 2750-3449"),
    (lambda d: d["sr"].update(nof_prb=10), "sr.nof_prb", "allowed: 1..9"),
    (lambda d: d["cqi"].update(period_ms=3), "cqi.period_ms", "allowed: 2, 5, 10, 20, 40, 80, 160, 32, 64, 128"),
    (lambda d: d["cells"][0].update(rf_port=1), "cells[0].rf_port", "allowed: 0"),
    (lambda d: d["sr"].update(subframe_offset=25), "sr.subframe_offset", "allowed: 0..19"),
])
def test_invalid_value_names_file_field_allowed(tmp_path: Path, change, field, allowed):
    data = _base()
    change(data)
    path = _write(tmp_path, data)
    message = _errors(path)
    assert f"{path}: {field}:" in message
    assert allowed in message


def test_uplink_noise_floor_renders_srsenbs_channel_emulator_and_a_bad_level_is_named(tmp_path: Path):
    """`channel.ul_awgn` (the srsran-zmq lab's uplink noise floor) becomes srsenb's [channel.ul.awgn]; a profile
    without it renders none (the examples' golden files)."""
    data = _base()
    data["channel"] = {"ul_awgn": {"snr_db": -79}}
    conf = _ini(render_texts(load_profile(_write(tmp_path, data)))["enb.conf"])
    assert dict(conf["channel.ul"]) == {"enable": "true"}
    assert dict(conf["channel.ul.awgn"]) == {"enable": "true", "signal_power": "0", "snr": "-79"}
    assert not any(k.startswith("channel") for k in _ini(render_texts(load_profile(_write(tmp_path, _base())))
                                                             ["enb.conf"]).sections())
    data["channel"] = {"ul_awgn": {"snr_db": 300}}
    message = _errors(_write(tmp_path, data))
    assert "channel.ul_awgn.snr_db:" in message and "200" in message, message


def test_channel_must_fit_in_the_band(tmp_path: Path):
    data = _base()
    data["cells"][0]["dl_earfcn"] = 3449  # band 7's last EARFCN: a 5 MHz carrier there sticks out
    message = _errors(_write(tmp_path, data))
    assert "cells[0].dl_earfcn" in message and "sticks out of band 7" in message


def test_six_prb_cell_needs_prach_at_zero(tmp_path: Path):
    data = _base()
    data["enb"]["n_prb"] = 6
    message = _errors(_write(tmp_path, data))
    assert "prach.freq_offset" in message and "allowed: 0..0" in message
    data["prach"]["freq_offset"] = 0
    assert load_profile(_write(tmp_path, data)).enb.n_prb == 6


def test_earfcn_to_frequency_band_7_and_3():
    assert carrier(3350)[:5] == (7, 3350, 21350, 2680.0, 2560.0)  # srsenb prints DL=2680.0 UL=2560.0 for 3350
    assert carrier(1575).dl_mhz == 1842.5 and carrier(1575).band == 3


def test_identity_of_a_profile():
    ident = network_identity(ROOM / "examples/zmq-25prb.yaml")
    assert (ident.mcc, ident.mnc, ident.tacs, ident.mme_addrs) == ("001", "01", [7], ["127.0.1.100"])


# ----- CLI --------------------------------------------------------------------------------------------
runner = CliRunner()


def test_cli_render_and_check(tmp_path: Path):
    profile = ROOM / "examples/zmq-25prb.yaml"
    result = runner.invoke(app, ["ran", "render", str(profile), "--out", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "out/rr.conf").read_text() == (GOLDEN / "zmq-25prb/rr.conf").read_text()
    result = runner.invoke(app, ["ran", "check", str(profile)])
    assert result.exit_code == 0 and "DL 2680.0 MHz" in result.output


def test_cli_bad_profile_exits_2(tmp_path: Path):
    data = _base()
    data["sr"]["period_ms"] = 7
    result = runner.invoke(app, ["ran", "check", str(_write(tmp_path, data))])
    assert result.exit_code == 2
    assert "sr.period_ms" in result.output and "Traceback" not in result.output


@pytest.fixture
def stub_core(monkeypatch):
    """A core profile reader standing in for the core room's: YAML {mcc, mnc, tacs, mme}."""
    import cellab.contracts.registry as registry

    real_load = registry.load

    def read(path: Path) -> NetworkIdentity:
        data = yaml.safe_load(Path(path).read_text())
        return NetworkIdentity(source=str(path), mcc=data["mcc"], mnc=data["mnc"], tacs=data["tacs"],
                               mme_addrs=[data["mme"]], fields={"tac": "tacs", "mcc": "plmn.mcc", "mnc": "plmn.mnc",
                                                                "mme": "mme.s1ap_addr"})

    monkeypatch.setattr(registry, "load", lambda group, name, what: read if (group, name) == (
        "cellab.identity", "core") else real_load(group, name, what))


def test_check_core_tac_mismatch_names_both_files(tmp_path: Path, stub_core):
    core = _write(tmp_path, {"mcc": "001", "mnc": "01", "tacs": [1], "mme": "127.0.1.100"}, "core.yaml")
    profile = ROOM / "examples/zmq-25prb.yaml"
    result = runner.invoke(app, ["ran", "check", str(profile), "--core", str(core)])
    assert result.exit_code == 2
    assert "TAC 7" in result.output and f"{profile}: cells[].tac" in result.output
    assert f"{core}: tacs" in result.output and "[1]" in result.output
    good = _write(tmp_path, {"mcc": "001", "mnc": "01", "tacs": [7], "mme": "127.0.1.100"}, "core-ok.yaml")
    assert runner.invoke(app, ["ran", "check", str(profile), "--core", str(good)]).exit_code == 0


def test_check_against_the_core_rooms_srsepc_example():
    pytest.importorskip("cellab.epc.profile", reason="the core room (cellab.epc) is not installed")
    core = ROOM.parent / "core-config/examples/srsran-zmq.yaml"
    if not core.exists():
        pytest.skip(f"{core} is absent")
    result = runner.invoke(app, ["ran", "check", str(ROOM / "examples/zmq-25prb.yaml"), "--core", str(core)])
    assert result.exit_code == 0, result.output
