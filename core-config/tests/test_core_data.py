"""Issue 27, core data: subscribers and core profiles that no EPC could serve are refused naming the file,
the row or field and the allowed values, and `cellab core render` writes nothing. All but the GBR QCI's
message were already right (checked here so they stay so); a GBR QCI (1-4) for a default bearer was refused
only as 'greater than or equal to 5'."""

from __future__ import annotations


import pytest
import yaml

from cellab.epc.profile import load_profile
from cellab.epc.subscribers import parse_subscribers
from cellab.errors import InputError, InputErrors
from cellab.testkit.helpers import cellab_in_process

from .conftest import EXAMPLES

PROFILE = EXAMPLES / "lab-core.yaml"  # PLMN 00101, UE subnet 10.45.0.0/16, APN internet, S1 192.0.2.10
HEADER = "name,imsi,k,opc,amf,apn,static_ip,sqn,qci\n"
KEYS = "00112233445566778899aabbccddeeff,63bfa50ee6523365ff14c1f45f88737d,8000"


def _row(imsi: str = "001010123456780", apn: str = "internet", ip: str = "", qci: str = "9", name: str = "ue1") -> str:
    return f"{name},{imsi},{KEYS},{apn},{ip},0,{qci}\n"


@pytest.mark.parametrize("rows, field, says", [
    (_row(imsi="\u0660\u0660\u0661\u0660\u0661\u0660123456780"), "row 1.imsi", "15 ASCII digits"),  # Arabic-Indic
    (_row(imsi="\uff10\uff10\uff11\uff10\uff11\uff10123456780"), "row 1.imsi", "15 ASCII digits"),  # full-width
    (_row(ip="10.45.0.9") + _row(imsi="001010123456781", ip="10.45.0.9", name="ue2"), "row 2.static_ip",
     "also the static IP of row 1"),
    (_row(ip="10.46.0.9"), "row 1.static_ip", "outside the profile's UE subnet 10.45.0.0/16"),
    (_row(ip="10.45.0.1"), "row 1.static_ip", "the UE gateway"),
    (_row(apn="ims"), "row 1.apn", "APN ims is not served by core profile lab-core (allowed: internet)"),
    (_row(qci="1"), "row 1.qci", "QCI 1 is a GBR QCI (1-4)"),
    (_row(qci="4"), "row 1.qci", "allowed: the non-GBR QCIs 5..9"),
])
def test_subscribers_that_do_not_fit(rows, field, says):
    with pytest.raises(InputErrors) as caught:
        parse_subscribers(HEADER + rows, "subs.csv", profile=load_profile(PROFILE))
    said = str(caught.value)
    assert f"subs.csv: {field}: " in said and says in said, said



def test_srsepc_takes_its_one_apn_or_none_and_refuses_another():
    """srsEPC's user_db.csv has no APN column: every UE gets epc.conf's one APN (srsran-zmq.yaml: srsapn). A row
    naming another APN would get srsapn all the same, silently; it is refused. A row naming none is fine."""
    profile = load_profile(EXAMPLES / "srsran-zmq.yaml")
    row = "ue1,001010123456780," + KEYS + ",{apn},,0,9\n"
    for apn in ("srsapn", "SRSAPN", ""):
        (sub,) = parse_subscribers(HEADER + row.format(apn=apn), "subs.csv", profile=profile, flavour="srsepc")
        assert sub.imsi == "001010123456780"
    with pytest.raises(InputErrors) as caught:
        parse_subscribers(HEADER + row.format(apn="internet"), "subs.csv", profile=profile, flavour="srsepc")
    said = str(caught.value)
    assert "subs.csv: row 1.apn: APN internet is not served by core profile" in said and "srsEPC" in said, said
    assert "(allowed: srsapn)" in said, said
    # the same rows for Open5GS, which serves the profile's APNs by name: an empty one is its default, internet
    with pytest.raises(InputErrors):
        parse_subscribers(HEADER + row.format(apn=""), "subs.csv", profile=profile, flavour="open5gs")

@pytest.mark.parametrize("change, field, says", [
    ({"apns": [{"name": "internet", "qci": 2}]}, "apns[0].qci", "QCI 2 is a GBR QCI (1-4)"),
    ({"gtpu_addr": "10.45.0.1"}, "gtpu_addr", "the UE gateway of ue_subnet 10.45.0.0/16"),
    ({"plmn": {"mcc": "0\u0661" + "1", "mnc": "01"}}, "plmn.mcc", ""),
])
def test_profiles_that_do_not_fit(tmp_path, change, field, says):
    data = yaml.safe_load(PROFILE.read_text()) | change
    path = tmp_path / "core.yaml"
    path.write_text(yaml.safe_dump(data, allow_unicode=True))
    with pytest.raises((InputError, InputErrors)) as caught:
        load_profile(path)
    said = str(caught.value)
    assert f"{field}: " in said and says in said, said


def test_render_refuses_and_writes_nothing(capsys, tmp_path):
    data = yaml.safe_load(PROFILE.read_text()) | {"flavour": "srsepc"}
    profile, subs, out = tmp_path / "core.yaml", tmp_path / "subs.csv", tmp_path / "out"
    profile.write_text(yaml.safe_dump(data))
    subs.write_text(HEADER + _row(ip="10.45.0.9") + _row(imsi="001010123456781", ip="10.45.0.9", name="ue2"))
    code, _, err = cellab_in_process(capsys, "core", "render", str(profile), "--subscribers", str(subs),
                                     "--out", str(out))
    assert code == 2 and "row 2.static_ip" in err and not out.exists(), err


def test_add_refuses_a_static_ip_a_stored_subscriber_holds(capsys, ferretdb, tmp_path):
    """Each file was checked against itself only: a second file's UE on the first's static IP was added."""
    url, _ = ferretdb
    first, second = tmp_path / "first.csv", tmp_path / "second.csv"
    first.write_text(HEADER + _row(ip="10.45.0.9"))
    second.write_text(HEADER + _row(imsi="001010123456781", ip="10.45.0.9", name="ue2")
                      + _row(imsi="001010123456782", name="ue3"))
    args = ("--db", f"{url.rstrip('/')}/open5gs", "--profile", str(PROFILE))
    code, out, err = cellab_in_process(capsys, "core", "subscribers", "add", str(first), *args)
    assert code == 0, err
    code, out, err = cellab_in_process(capsys, "core", "subscribers", "add", str(second), *args)
    said = " ".join(err.split())
    assert code == 2 and "second.csv: imsi 001010123456781.static_ip: 10.45.0.9 is the static IP of stored " \
                          "subscriber 001010123456780" in said, said
    code, out, err = cellab_in_process(capsys, "core", "subscribers", "list", "--db", f"{url.rstrip('/')}/open5gs")
    assert code == 0 and "001010123456782" not in out and "001010123456781" not in out, out  # nothing written
    code, out, err = cellab_in_process(capsys, "core", "subscribers", "add", str(first), *args)
    assert code == 0, err  # the same subscriber again keeps its own address
