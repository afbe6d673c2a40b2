"""Subscriber round trip on a real FerretDB through the `cellab` command: add, list (masked), re-add (no
duplicate), remove, export; document shape and Int64 SQN read back with pymongo; a bad file writes
nothing; an unreachable database fails naming the URL in time; no K or OPc in any output or log."""

from __future__ import annotations

import csv
import subprocess
import sys
import time
from pathlib import Path

import pymongo
import pytest
from bson import Int64
from bson.codec_options import CodecOptions

from cellab.epc.subscribers import load_subscribers
from cellab.errors import InputErrors

from cellab.testkit.helpers import free_port

from .conftest import EXAMPLES

SUBS = EXAMPLES / "subscribers.csv"
SECRETS = [value for sub in load_subscribers(SUBS) for value in (sub.k, sub.opc)]


def cellab(*args: str, timeout_s: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cellab", *args], capture_output=True, text=True,
                          timeout=timeout_s)


def _no_secret(text: str) -> None:
    for secret in SECRETS:
        assert secret.lower() not in text.lower(), "a K/OPc value leaked"


def _raw(url: str, db: str) -> pymongo.collection.Collection:
    client = pymongo.MongoClient(url, serverSelectionTimeoutMS=3000)
    return client.get_database(db, codec_options=CodecOptions()).subscribers


@pytest.mark.background  # a real FerretDB, no clock of its own (conftest.py)
@pytest.mark.parametrize("flavour", ["open5gs", "nextepc"])
def test_round_trip(ferretdb, tmp_path, flavour):
    url, folder = ferretdb
    db_url = f"{url}{flavour}"
    outputs = []

    def run(*args: str) -> subprocess.CompletedProcess:
        result = cellab("core", "subscribers", *args, "--db", db_url, "--flavour", flavour)
        outputs.append(result.stdout + result.stderr)
        assert result.returncode == 0, result.stderr
        return result

    assert "2 added" in run("add", str(SUBS), "--plmn", "00101").stdout
    assert "0 added, 2 updated" in run("add", str(SUBS), "--plmn", "00101").stdout
    coll = _raw(url, flavour)
    docs = list(coll.find({}, {"_id": 0}).sort("imsi", 1))
    assert [d["imsi"] for d in docs] == ["001010123456780", "001010123456781"]  # no duplicates
    sec = docs[0]["security"]
    assert isinstance(sec["sqn"], Int64) and sec["sqn"] == 4660
    assert sec["k"] == SECRETS[0] and sec["opc"] == SECRETS[1] and sec["amf"] == "8000"
    if flavour == "open5gs":
        session = docs[1]["slice"][0]["session"][0]
        assert docs[0]["schema_version"] == 1 and session["name"] == "internet"
        assert session["qos"]["index"] == 9 and session["ue"]["ipv4"] == "10.45.0.9"
        assert docs[0]["ambr"]["downlink"] == {"value": 1_000_000, "unit": 1}
    else:
        pdn = docs[1]["pdn"][0]
        assert "slice" not in docs[1] and pdn["apn"] == "internet" and pdn["qos"]["qci"] == 9
        assert isinstance(docs[1]["ambr"]["downlink"], Int64)

    listing = run("list").stdout
    assert "001010123456780" in listing and "****eeff" in listing and "2 subscribers" in listing

    export = tmp_path / "user_db.csv"
    run("export", str(export))
    rows = [r for r in csv.reader(export.read_text().splitlines()) if not r[0].startswith("#")]
    assert [(r[2], r[3], r[5], r[7]) for r in rows][0] == ("001010123456780", SECRETS[0], SECRETS[1], "000000001234")
    assert export.stat().st_mode & 0o077 == 0

    assert "removed 1 of 1" in run("remove", "001010123456781").stdout
    assert [d["imsi"] for d in coll.find()] == ["001010123456780"]

    for text in outputs + [(folder / "ferretdb.log").read_text()]:
        _no_secret(text)


@pytest.mark.background  # a real FerretDB, no clock of its own (conftest.py)
def test_bad_row_writes_nothing_and_names_rows(ferretdb, tmp_path):
    url, _ = ferretdb
    bad = tmp_path / "subs.csv"
    good_k, good_opc = SECRETS[0], SECRETS[1]
    bad.write_text("imsi,k,opc,amf\n"
                   f"001010000000001,{good_k},{good_opc},8000\n"
                   f"00101000000002,{good_k},{good_opc},8000\n"          # 14 digits
                   f"001010000000003,{good_k[:-1]}x,{good_opc},80000\n"  # bad K and AMF
                   f"999990000000004,{good_k},{good_opc},8000\n")        # not our PLMN
    result = cellab("core", "subscribers", "add", str(bad), "--db", f"{url}open5gs", "--plmn", "00101")
    assert result.returncode == 2
    err = result.stderr
    for needle in ("subs.csv", "row 2.imsi", "row 3.k", "row 3.amf", "row 4.imsi", "PLMN 00101"):
        assert needle in err, needle
    assert "row 1" not in err
    _no_secret(err)
    assert _raw(url, "open5gs").count_documents({}) == 0


def test_yaml_input_and_op():
    subs = load_subscribers(EXAMPLES / "subscribers.csv")
    assert subs[0].sqn == 4660 and subs[1].static_ip == "10.45.0.9"


def test_yaml_file(tmp_path):
    f = tmp_path / "s.yaml"
    f.write_text("subscribers:\n  - {imsi: '001010000000009', k: " + "a" * 32 + ", op: " + "b" * 32 + "}\n"
                 "  - {imsi: '001010000000010', k: " + "a" * 32 + "}\n")
    with pytest.raises(InputErrors) as err:
        load_subscribers(f, "00101")
    assert "row 2" in str(err.value) and "opc and op" in str(err.value) and "row 1" not in str(err.value)


def test_unreachable_db_names_url_within_timeout():
    port = free_port()  # nothing listens there
    url = f"mongodb://127.0.0.1:{port}/open5gs"
    start = time.monotonic()
    result = cellab("core", "subscribers", "add", str(SUBS), "--db", url, "--plmn", "00101", "--timeout-s", "1.5")
    elapsed_s = time.monotonic() - start
    assert result.returncode == 2
    assert url in result.stderr and "Traceback" not in result.stderr
    assert elapsed_s < 1.5 + 8  # interpreter start-up and imports on a loaded host
    _no_secret(result.stdout + result.stderr)


@pytest.mark.background  # a real FerretDB, no clock of its own (conftest.py)
def test_db_up_status_down(tmp_path):
    from cellab.epc import ferret

    try:
        ferret.find_program("cellab-ferretdb")
    except Exception as exc:
        pytest.skip(f"cellab-ferretdb not built: {exc}")
    folder, port = tmp_path / "fdb", free_port()
    up = cellab("core", "db", "up", "--dir", str(folder), "--port", str(port))
    try:
        assert up.returncode == 0 and "answering" in up.stdout, up.stderr
        status = cellab("core", "db", "status", "--dir", str(folder), "--port", str(port))
        assert status.returncode == 0 and f"127.0.0.1:{port}" in status.stdout
        again = cellab("core", "db", "up", "--dir", str(folder), "--port", str(port))  # idempotent
        assert again.returncode == 0 and Path(folder / "ferretdb.pid").read_text().split()[0] in again.stdout
    finally:
        down = cellab("core", "db", "down", "--dir", str(folder))
    assert "stopped" in down.stdout
    assert cellab("core", "db", "status", "--dir", str(folder), "--port", str(port)).returncode == 1


def test_not_a_mongodb_url_is_refused_before_any_connection():
    result = cellab("core", "subscribers", "list", "--db", "http://127.0.0.1:9/x")
    assert result.returncode == 2 and "--db: url: http://127.0.0.1:9/x is not a MongoDB URL" in result.stderr
