"""Subscriber data that must be refused, and secrets that must never be printed.

Refused: IMSIs of non-ASCII digits, short ones, another PLMN's; two subscribers with one static IP; an IP
outside the profile's UE subnet (or its gateway); an APN the profile does not serve; a GBR QCI for the
default bearer; files that are no subscriber files (a profile, srsEPC's own user_db.csv), in another
encoding, with huge fields, deep nesting or integers beyond 64 bits; a FIFO (without hanging).
`--timeout-s` NaN/inf/0/negative: a clear error naming --timeout-s, not --db.
Secrets: a stored subscriber whose K or OPc is malformed makes `list` name it (IMSI, field) and exit 1, and
`export` refuse, without printing either value (no traceback, no pydantic `input_value`)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pymongo
import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from cellab.cli import app
from cellab.epc.db import SubscriberDb, _scrub
from cellab.epc.profile import load_profile
from cellab.epc.subscribers import StoredSubscriberError, Subscriber, from_document, load_subscribers, \
    open5gs_document, parse_subscribers
from cellab.errors import InputError, InputErrors

from .conftest import EXAMPLES

pytestmark = pytest.mark.background  # no clock, no root: beside a lab test at SCHED_IDLE (conftest.py)

LAB = load_profile(EXAMPLES / "lab-core.yaml")  # PLMN 001-01, APN internet, UE subnet 10.45.0.0/16
K = "00112233445566778899aabbccddeeff"
OPC = "63bfa50ee6523365ff14c1f45f88737d"
HEADER = "imsi,k,opc,apn,static_ip,qci\n"


def _csv(tmp_path: Path, *rows: str, name: str = "subs.csv") -> Path:
    path = tmp_path / name
    path.write_text(HEADER + "".join(r + "\n" for r in rows))
    return path


def _refused(path: Path, **kwargs) -> str:
    with pytest.raises((InputError, InputErrors)) as info:
        load_subscribers(path, **kwargs)
    text = str(info.value)
    assert K not in text and OPC not in text, "a K/OPc value leaked into an error"
    return text


def row(imsi: str = "001010000000001", apn: str = "internet", ip: str = "", qci: str = "9",
        k: str = K, opc: str = OPC) -> str:
    return f"{imsi},{k},{opc},{apn},{ip},{qci}"


# ----- wrongly accepted before --------------------------------------------------------------------------
@pytest.mark.parametrize("imsi", ["٠٠١٠١٠٠٠٠٠٠٠٠٠١", "00101000000000²", "００１０１００００００００１"])
def test_imsi_of_non_ascii_digits(tmp_path, imsi):
    assert "row 1.imsi: IMSI must be 15 ASCII digits" in _refused(_csv(tmp_path, row(imsi=imsi)))


def test_short_imsi_and_another_plmn(tmp_path):
    text = _refused(_csv(tmp_path, row(imsi="00101000000001"), row(imsi="999990000000002")), profile=LAB)
    assert "row 1.imsi: IMSI must be 15" in text and "row 2.imsi: IMSI does not start with the PLMN 00101" in text


def test_two_subscribers_with_one_static_ip(tmp_path):
    text = _refused(_csv(tmp_path, row(ip="10.45.0.9"), row(imsi="001010000000002", ip="10.45.0.9")))
    assert "row 2.static_ip: 10.45.0.9 is also the static IP of row 1" in text


@pytest.mark.parametrize(("ip", "needle"), [("10.46.0.9", "outside the profile's UE subnet 10.45.0.0/16"),
                                            ("10.45.0.1", "is the UE gateway"), ("10.45.0.0", "subnet's own address"),
                                            ("10.45.255.255", "broadcast address")])
def test_ip_outside_the_profiles_subnet(tmp_path, ip, needle):
    text = _refused(_csv(tmp_path, row(ip=ip)), profile=LAB)
    assert "row 1.static_ip" in text and needle in text and "10.45.0.2 .. 10.45.255.254" in text


def test_apn_the_profile_does_not_serve(tmp_path):
    text = _refused(_csv(tmp_path, row(apn="ims")), profile=LAB)
    assert "row 1.apn: APN ims is not served by core profile lab-core (allowed: internet)" in text


@pytest.mark.parametrize("qci", ["1", "4", "10", "65"])
def test_gbr_or_unknown_qci_for_the_default_bearer(tmp_path, qci):
    assert "row 1.qci" in _refused(_csv(tmp_path, row(qci=qci)))


def test_ipv6_zone_and_non_ascii_static_ips(tmp_path):
    text = _refused(_csv(tmp_path, row(ip="10.45.0.٩"), row(imsi="001010000000002", ip="fe80::1%eth0")))
    assert "row 1.static_ip" in text and "row 2.static_ip" in text


def test_a_profile_is_not_a_subscriber_file(tmp_path):
    path = tmp_path / "core.yaml"
    path.write_text((EXAMPLES / "lab-core.yaml").read_text())
    assert "not a subscriber file" in _refused(path)


def test_srsepc_user_db_is_named_and_its_secrets_are_not_echoed(tmp_path):
    path = tmp_path / "user_db.csv"
    path.write_text(f"ue1,mil,001010123456780,{K},opc,{OPC},8000,000000001234,9,dynamic\n")
    assert "srsEPC's own user_db.csv" in _refused(path)
    # any first row of data (no header) is refused without repeating its cells
    path.write_text(f"001010123456780,{K},{OPC}\n")
    assert "3 unknown columns" in _refused(path)


def test_not_utf8_and_utf16(tmp_path):
    latin = tmp_path / "latin.csv"
    latin.write_bytes((HEADER + row() + ",\xe9\n").encode("latin-1"))
    assert "not UTF-8 text" in _refused(latin)
    utf16 = tmp_path / "utf16.yaml"
    utf16.write_text("subscribers: []\n", encoding="utf-16")
    assert "not UTF-8 text" in _refused(utf16)


def test_huge_fields(tmp_path):
    assert "field larger than field limit" in _refused(_csv(tmp_path, row(apn="a" * 5000)))
    big = tmp_path / "big.yaml"
    big.write_text(f"- {{imsi: '001010000000001', k: {K}, opc: {OPC}, name: {'n' * 100_000}}}\n")
    assert "row 1.name" in _refused(big)


def test_deep_nesting_and_integers_beyond_64_bits(tmp_path):
    deep = tmp_path / "deep.yaml"
    deep.write_text("subscribers: " + "[" * 200 + "]" * 200 + "\n")
    assert "nested deeper" in _refused(deep)
    wide = tmp_path / "wide.yaml"
    wide.write_text(f"- {{imsi: '001010000000001', k: {K}, opc: {OPC}, sqn: {2**70}}}\n")
    assert "does not fit in 64 bits" in _refused(wide)
    ambr = tmp_path / "ambr.csv"
    ambr.write_text(f"imsi,k,opc,ambr_downlink_kbps\n001010000000001,{K},{OPC},{2**40}\n")
    assert "row 1.ambr_downlink_kbps" in _refused(ambr)


def test_a_fifo_is_refused_without_hanging(tmp_path):
    fifo = tmp_path / "subs.csv"
    os.mkfifo(fifo)
    result: list[str] = []
    worker = threading.Thread(target=lambda: result.append(_refused(fifo)), daemon=True)
    worker.start()
    worker.join(5)
    assert not worker.is_alive(), "reading a FIFO hung"
    assert "a FIFO" in result[0]


def test_malformed_k_in_a_file_is_named_not_shown(tmp_path):
    bad_k = K[:-1] + "g"
    text = _refused(_csv(tmp_path, row(k=bad_k)))
    assert "row 1.k: K must be 32 hex digits" in text and bad_k not in text


def test_model_errors_and_repr_never_carry_secrets():
    bad_k = K[:-2] + "zz"
    with pytest.raises(ValidationError) as info:
        Subscriber(imsi="001010000000001", k=bad_k, opc=OPC)
    assert bad_k not in str(info.value) and bad_k not in repr(info.value.errors(include_input=False))
    sub = Subscriber(imsi="001010000000001", k=K, opc=OPC)
    assert K not in repr(sub) and OPC not in repr(sub) and K not in str(sub)


def test_yaml_text_is_told_from_csv_text():
    yaml_text = f"subscribers:\n  - {{imsi: '001010000000001', k: {K}, opc: {OPC}}}\n"
    assert parse_subscribers(yaml_text, "agent", profile=LAB)[0].imsi == "001010000000001"
    csv_text = HEADER + row() + "\n"
    assert parse_subscribers(csv_text, "agent", profile=LAB)[0].k == K


# ----- stored documents ---------------------------------------------------------------------------------
def _doc(**security) -> dict:
    doc = open5gs_document(Subscriber(imsi="001010000000001", k=K, opc=OPC))
    doc["security"].update(security)
    return doc


@pytest.mark.parametrize("security", [{"k": K[:-1] + "x"}, {"k": K + "00"}, {"opc": OPC[:-3]}, {"k": None},
                                      {"k": 12345}])
def test_stored_document_errors_name_fields_not_values(security):
    with pytest.raises(StoredSubscriberError) as info:
        from_document(_doc(**security))
    text = str(info.value)
    assert "001010000000001" in text and "security." in text
    for value in (K, OPC, K[:-1], OPC[:-3]):
        assert value not in text


@pytest.mark.parametrize("doc", [{"imsi": "001010000000001"}, {"imsi": "x", "security": "nope"}, {"slice": 3},
                                 {"imsi": "001010000000001", "security": {"k": K, "opc": OPC, "sqn": "zz"}}])
def test_stored_documents_that_are_no_subscribers(doc):
    with pytest.raises(StoredSubscriberError):
        from_document(doc)


def test_secret_like_runs_are_scrubbed_from_database_messages():
    assert _scrub(f"E11000 dup key: {{ k: \"{K}\" }}") == 'E11000 dup key: { k: "****" }'


class _FakeCollection:
    def __init__(self, docs):
        self.docs = docs

    def find(self, *_):
        return self

    def sort(self, *_):
        return list(self.docs)


runner = CliRunner()


def _invoke(monkeypatch, docs, *args):
    """`cellab core subscribers ...` in-process, its database answering `docs`."""
    real_init = SubscriberDb.__init__

    def init(self, url, flavour="open5gs", timeout_s=5.0):
        real_init(self, url, flavour, timeout_s)
        self.collection = _FakeCollection(docs)

    monkeypatch.setattr(SubscriberDb, "__init__", init)
    return runner.invoke(app, ["core", "subscribers", *args, "--db", "mongodb://127.0.0.1:9/open5gs"])


def test_list_names_a_malformed_stored_k_without_printing_it(monkeypatch):
    bad = _doc(k=K[:-1] + "x")
    bad["imsi"] = "001010000000002"
    result = _invoke(monkeypatch, [_doc(), bad], "list")
    out = result.output + (result.stderr if result.stderr_bytes is not None else "")
    assert result.exit_code == 1
    assert "001010000000001" in out and "****eeff" in out  # the valid one is listed
    assert "stored subscriber 001010000000002: security.k: K must be 32 hex digits" in out
    assert "1 subscribers, 1 invalid" in out
    assert K[:-1] not in out and OPC not in out and "Traceback" not in out and "input_value" not in out


def test_export_refuses_and_writes_nothing(monkeypatch, tmp_path):
    out_file = tmp_path / "user_db.csv"
    result = _invoke(monkeypatch, [_doc(opc="zz" + OPC[2:])], "export", str(out_file))
    assert result.exit_code != 0 and not out_file.exists()
    text = str(result.exception) + result.output
    assert "security.opc" in text and OPC[2:] not in text and K not in text


# ----- the command line, as a person runs it ------------------------------------------------------------
def cellab(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cellab", *args], capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "0", "-1", "1e9"])
@pytest.mark.parametrize("command", [["list"], ["export", "/tmp/cellab-never-written.csv"]])
def test_bad_timeout_is_named_not_blamed_on_db(command, value):
    result = cellab("core", "subscribers", *command, "--db", "mongodb://127.0.0.1:9/open5gs", "--timeout-s", value)
    assert result.returncode == 2, result.stderr
    assert "--timeout-s: timeout:" in result.stderr and "0 < s <= 3600" in result.stderr
    assert "--db" not in result.stderr and "Traceback" not in result.stderr
    assert not Path("/tmp/cellab-never-written.csv").exists()


def test_cli_list_on_a_stored_malformed_k_prints_no_secret(ferretdb):
    url, folder = ferretdb
    coll = pymongo.MongoClient(url, serverSelectionTimeoutMS=3000)["open5gs"]["subscribers"]
    good = _doc()
    bad = _doc(k=K[:-1] + "x", opc=OPC)
    bad["imsi"] = "001010000000002"
    coll.insert_many([good, bad])
    outputs = []
    for args in (["list"], ["export", str(folder / "out.csv")]):
        result = cellab("core", "subscribers", *args, "--db", f"{url}open5gs")
        outputs.append(result.stdout + result.stderr)
        assert "Traceback" not in result.stderr and "input_value" not in result.stderr
        assert result.returncode == (1 if args == ["list"] else 2), result.stderr
    assert "security.k: K must be 32 hex digits" in outputs[0] and "1 invalid" in outputs[0]
    assert "security.k" in outputs[1] and not (folder / "out.csv").exists()
    for text in outputs:
        assert K[:-1] not in text and OPC not in text


def test_check_subscribers_file_for_an_inventory(tmp_path):
    from cellab.epc.subscribers import check_subscribers_file

    srs = EXAMPLES / "srsran-zmq.yaml"  # APN srsapn, UE pool 172.16.0.0/24
    good = _csv(tmp_path, row(apn="", ip="172.16.0.2"), name="good.csv")
    assert check_subscribers_file(good, srs) == 1  # srsEPC: a row without an APN gets epc.conf's (srsapn)
    with pytest.raises(InputErrors, match="row 1.apn"):  # Open5GS: no APN is internet, which it does not serve
        check_subscribers_file(good, srs, flavour="open5gs")
    with pytest.raises(InputErrors, match="row 1.apn: APN internet is not served"):  # srsEPC would give it srsapn
        check_subscribers_file(_csv(tmp_path, row(ip="172.16.0.2"), name="other.csv"), srs)
    short = _csv(tmp_path, row(imsi="00101000000001", ip="172.16.0.2"), name="short.csv")
    with pytest.raises(InputErrors, match="row 1.imsi"):
        check_subscribers_file(short, srs)
