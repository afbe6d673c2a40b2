"""Renders for Open5GS 2.7+ and 2.6, NextEPC and srsEPC: documented keys at documented paths, parsed back
(YAML, INI, CSV), and the golden files of the example profile."""

from __future__ import annotations

import configparser
import csv
import os
from pathlib import Path

import pytest
import yaml

from cellab.contracts.identity import identity_mismatches, load_identity, NetworkIdentity
from cellab.epc.profile import load_profile, network_identity
from cellab.epc.render import render
from cellab.epc.subscribers import load_subscribers, srsepc_csv
from cellab.errors import InputErrors

HERE = Path(__file__).resolve().parent
EXAMPLES = HERE.parent / "examples"
GOLDEN = HERE / "golden"
LAB = EXAMPLES / "lab-core.yaml"
OPEN5GS_FILES = {"mme.yaml", "sgwc.yaml", "sgwu.yaml", "smf.yaml", "upf.yaml", "hss.yaml", "pcrf.yaml"}


def _yaml(folder: Path, name: str) -> dict:
    return yaml.safe_load((folder / name).read_text())


def test_open5gs_27_layout(tmp_path):
    render(load_profile(LAB), "open5gs", tmp_path)
    assert {p.name for p in tmp_path.iterdir()} == OPEN5GS_FILES
    mme = _yaml(tmp_path, "mme.yaml")["mme"]
    assert mme["s1ap"]["server"][0]["address"] == "192.0.2.10"
    assert mme["gtpc"]["client"]["sgwc"][0]["address"] == "127.0.0.3"
    assert mme["gummei"][0] == {"plmn_id": {"mcc": "001", "mnc": "01"}, "mme_gid": 2, "mme_code": 1}
    assert mme["tai"][0]["tac"] == [7]
    assert _yaml(tmp_path, "sgwu.yaml")["sgwu"]["gtpu"]["server"][0]["address"] == "192.0.2.10"
    smf = _yaml(tmp_path, "smf.yaml")["smf"]
    assert smf["session"] == [{"subnet": "10.45.0.0/16", "gateway": "10.45.0.1"}]
    assert smf["pfcp"]["client"]["upf"][0]["address"] == "127.0.0.7"
    assert _yaml(tmp_path, "hss.yaml")["db_uri"] == "mongodb://127.0.0.1:27017/open5gs"
    assert _yaml(tmp_path, "mme.yaml")["logger"]["file"]["path"].endswith("/mme.log")


def test_open5gs_26_layout_uses_addr_lists(tmp_path):
    render(load_profile(LAB), "open5gs-2.6", tmp_path)
    doc = _yaml(tmp_path, "mme.yaml")
    assert doc["mme"]["s1ap"] == [{"addr": "192.0.2.10"}]
    assert "server" not in str(doc)
    assert doc["mme"]["gummei"]["plmn_id"] == {"mcc": "001", "mnc": "01"}
    assert doc["sgwc"]["gtpc"] == [{"addr": "127.0.0.3"}]
    assert _yaml(tmp_path, "sgwu.yaml")["sgwu"]["gtpu"] == [{"addr": "192.0.2.10"}]
    assert _yaml(tmp_path, "upf.yaml")["upf"]["subnet"] == [{"addr": "10.45.0.1/16"}]
    assert isinstance(_yaml(tmp_path, "hss.yaml")["logger"]["file"], str)


def test_nextepc_files_and_peers(tmp_path):
    render(load_profile(LAB), "nextepc", tmp_path)
    conf = _yaml(tmp_path, "nextepc.conf")
    assert conf["db_uri"] == "mongodb://127.0.0.1:27017/open5gs"  # the profile names its database
    assert conf["mme"]["gummei"]["plmn_id"] == {"mcc": "001", "mnc": "01"}
    assert conf["mme"]["tai"] == [{"plmn_id": {"mcc": "001", "mnc": "01"}, "tac": 7}]
    assert conf["sgw"]["gtpu"] == {"addr": "192.0.2.10"}
    assert conf["pgw"]["ue_pool"][0]["addr"] == "10.45.0.1/16"
    hss = _yaml(tmp_path, "hss.conf")
    assert hss["hss"]["freeDiameter"] == str(tmp_path.resolve() / "freeDiameter/hss.conf")
    fd = (tmp_path / "freeDiameter/hss.conf").read_text()
    assert 'Identity = "hss.localdomain";' in fd and 'ListenOn = "127.0.0.4";' in fd
    assert 'ConnectPeer = "mme.localdomain" { ConnectTo = "127.0.0.2"; No_TLS; };' in fd
    assert "dict_s6a.so" in fd and "dict_s6a.so" not in (tmp_path / "freeDiameter/pgw.conf").read_text()


def test_srsepc_ini_and_csv(tmp_path):
    prof = load_profile(EXAMPLES / "srsran-zmq.yaml")
    subs = load_subscribers(EXAMPLES / "subscribers.csv", "00101")
    render(prof, "srsepc", tmp_path, subscribers_csv=srsepc_csv(subs))
    ini = configparser.ConfigParser()
    ini.read(tmp_path / "epc.conf")
    assert ini["mme"]["mcc"] == "001" and ini["mme"]["mnc"] == "01"
    assert int(ini["mme"]["tac"], 16) == 7 and int(ini["mme"]["mme_code"], 16) == 26
    assert ini["mme"]["mme_bind_addr"] == "127.0.1.100" and ini["mme"]["apn"] == "srsapn"
    assert ini["spgw"]["sgi_if_addr"] == "172.16.0.1" and ini["hss"]["db_file"] == "user_db.csv"
    rows = [r for r in csv.reader((tmp_path / "user_db.csv").read_text().splitlines()) if not r[0].startswith("#")]
    assert [r[2] for r in rows] == ["001010123456780", "001010123456781"]
    assert rows[0][1] == "mil" and rows[0][4] == "opc" and rows[0][7] == f"{4660:012x}"
    assert rows[1][9] == "10.45.0.9" and rows[0][9] == "dynamic"


@pytest.mark.parametrize("flavour", ["open5gs", "open5gs-2.6", "nextepc", "srsepc"])
def test_golden(tmp_path, flavour):
    """The example profile renders byte for byte as reviewed (CELLAB_REGOLD=1 rewrites the golden files)."""
    out = tmp_path / flavour
    render(load_profile(LAB), flavour, out)
    golden = GOLDEN / flavour
    files = sorted(p.relative_to(out) for p in out.rglob("*") if p.is_file())
    if os.environ.get("CELLAB_REGOLD"):
        for rel in files:
            (golden / rel).parent.mkdir(parents=True, exist_ok=True)
            text = (out / rel).read_text().replace(str(out.resolve()), "@OUT@")
            (golden / rel).write_text(text)
    assert files == sorted(p.relative_to(golden) for p in golden.rglob("*") if p.is_file())
    for rel in files:
        assert (out / rel).read_text().replace(str(out.resolve()), "@OUT@") == (golden / rel).read_text(), rel


def test_bad_profile_names_file_and_fields(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nflavour: open6gs\nplmn: {mcc: '1', mnc: '01'}\ntacs: [70000]\n"
                   "mme: {s1ap_addr: nowhere}\n")
    with pytest.raises(InputErrors) as err:
        load_profile(bad)
    text = str(err.value)
    for needle in ("bad.yaml", "flavour", "open5gs-2.6", "plmn.mcc", "tacs", "mme.s1ap_addr"):
        assert needle in text


def test_identity_and_mismatch():
    ident = network_identity(LAB)
    assert (ident.mcc, ident.mnc, ident.tacs, ident.mme_addrs) == ("001", "01", [7], ["192.0.2.10"])
    assert load_identity("core", LAB) == ident  # through the entry point
    enb = NetworkIdentity(source="enb.yaml", mcc="001", mnc="01", tacs=[1], mme_addrs=["127.0.1.100"],
                          fields={"tac": "cells[0].tac", "mme": "mme_addr"})
    problems = identity_mismatches(enb, ident)
    assert any("TAC 1" in p and "tacs" in p and "lab-core.yaml" in p for p in problems)
    assert any("mme.s1ap_addr" in p and "mme_addr" in p for p in problems)
