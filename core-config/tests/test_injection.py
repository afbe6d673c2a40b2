"""Configuration injection: no value of a core profile can add a line, a key or a [section] to a rendered
Open5GS / NextEPC / srsEPC file. The profile's grammar refuses it when the profile is read, and each
renderer refuses it again (file, field, allowed form) for a profile that skipped validation; nothing is
written then. Also: each field's grammar (ASCII digits, names without invisible or look-alike characters,
IP addresses without zone ids, the MongoDB URI, the log folder) and the profile's cross-field rules."""

from __future__ import annotations

import configparser
from pathlib import Path

import pytest
import yaml

from cellab.epc.profile import CoreProfile, load_profile
from cellab.epc.render import freediameter_conf, render
from cellab.errors import InputError, InputErrors

from .conftest import EXAMPLES

LAB = EXAMPLES / "lab-core.yaml"
SRS = EXAMPLES / "srsran-zmq.yaml"
FLAVOURS = ("open5gs", "open5gs-2.6", "nextepc", "srsepc")
INI_INJECTION = "cellab\n[hss]\ndb_file = /etc/shadow"
YAML_INJECTION = "cellab\ndb_uri: mongodb://evil.example/x"
# every string of a profile that reaches a rendered file
TEXT_FIELDS = ("name", "mme.name", "mme.network_name", "mme.s1ap_addr", "gtpu_addr", "dns[0]", "ue_subnet",
               "db_uri", "log_dir", "apns[0].name", "plmn.mcc", "plmn.mnc")


def _data(path: Path = LAB) -> dict:
    return yaml.safe_load(path.read_text())


def _set(data: dict, dotted: str, value: object) -> dict:
    """data with `a.b[0].c` set to value (lists and mappings created as needed)."""
    node: object = data
    parts = dotted.replace("]", "").replace("[", ".").split(".")
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        key: object = int(part) if part.isdigit() else part
        if last:
            node[key] = value  # type: ignore[index]
        else:
            if isinstance(key, str) and key not in node:  # type: ignore[operator]
                node[key] = {}  # type: ignore[index]
            node = node[key]  # type: ignore[index]
    return data


def _write(tmp_path: Path, data: dict, name: str = "core.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data))
    return path


def _refused(path: Path) -> str:
    with pytest.raises(InputErrors) as info:
        load_profile(path)
    return str(info.value)


def _unvalidated(profile: CoreProfile, dotted: str, value: str) -> CoreProfile:
    """profile with one field replaced and no validation run (model_copy does not validate): what a caller
    that skipped load_profile would hand the renderer."""
    head, _, rest = dotted.partition(".")
    if head.startswith("apns["):
        apn = profile.apns[0].model_copy(update={rest: value})
        return profile.model_copy(update={"apns": [apn, *profile.apns[1:]]})
    if head.startswith("dns["):
        return profile.model_copy(update={"dns": [value, *profile.dns[1:]]})
    if rest:
        return profile.model_copy(update={head: getattr(profile, head).model_copy(update={rest: value})})
    return profile.model_copy(update={head: value})


# ----- the profile's grammar refuses injections -------------------------------------------------------
@pytest.mark.parametrize("payload", [INI_INJECTION, YAML_INJECTION, "cellab\r[mme]", "cellab # comment",
                                     "cellab\t", "cellab\x00"], ids=["ini", "yaml", "cr", "hash", "tab", "nul"])
@pytest.mark.parametrize("field", TEXT_FIELDS)
def test_profile_refuses_an_injection_in_every_text_field(tmp_path, field, payload):
    path = _write(tmp_path, _set(_data(), field, payload))
    message = _refused(path)
    assert f"{path}: {field}" in message
    assert "shadow" not in message.split(f"{path}: {field}")[0]


# ----- and each renderer refuses it again, writing nothing --------------------------------------------
@pytest.mark.parametrize("flavour", FLAVOURS)
@pytest.mark.parametrize("field", ["name", "mme.name", "mme.network_name", "mme.s1ap_addr", "gtpu_addr", "dns[0]",
                                   "db_uri", "log_dir", "apns[0].name", "plmn.mcc", "plmn.mnc"])
@pytest.mark.parametrize("payload", [INI_INJECTION, YAML_INJECTION], ids=["ini", "yaml"])
def test_renderer_refuses_an_injection_that_skipped_validation(tmp_path, flavour, field, payload):
    profile = _unvalidated(load_profile(SRS if flavour == "srsepc" else LAB), field, payload)
    out = tmp_path / "out"
    try:
        written = render(profile, flavour, out)
    except InputError as exc:
        assert exc.field and exc.allowed and "printable ASCII" in str(exc.allowed)
        assert not out.exists() or not any(p.is_file() for p in out.rglob("*")), "a refused render wrote files"
        return
    # a field this flavour does not write at all: then nothing of the payload may be in its files
    for path in written:
        text = path.read_text()
        assert "shadow" not in text and "evil.example" not in text, f"{path.name} carries the injection"


def test_srsepc_ini_keeps_its_sections_and_keys(tmp_path):
    render(load_profile(SRS), "srsepc", tmp_path)
    ini = configparser.ConfigParser(interpolation=None)
    ini.read(tmp_path / "epc.conf")
    assert ini.sections() == ["mme", "hss", "spgw", "pcap", "log"]
    assert ini["hss"]["db_file"] == "user_db.csv"


def test_freediameter_realm_cannot_break_out_of_its_quotes():
    with pytest.raises(InputError) as info:
        freediameter_conf("hss", realm='x"; LoadExtension = "/tmp/evil.so')
    assert "freeDiameter/hss.conf" in str(info.value) and "Realm" in str(info.value)


# ----- field grammars ---------------------------------------------------------------------------------
@pytest.mark.parametrize(("field", "value", "needle"), [
    ("plmn.mcc", "٠٠١", "plmn.mcc"),                       # Arabic-Indic digits
    ("plmn.mnc", "０１", "plmn.mnc"),                        # full-width digits
    ("name", "cell\u200blab", "name"),                      # zero-width space
    ("name", "\u202ebal-llec", "name"),                     # right-to-left override
    ("mme.name", "сellab-mme0", "mme.name"),                 # Cyrillic 'с'
    ("mme.network_name", "cellab\u2060", "mme.network_name"),  # word joiner
    ("apns[0].name", "іnternet", "apns[0].name"),           # Ukrainian 'і'
    ("mme.s1ap_addr", "fe80::1%eth0#x", "mme.s1ap_addr"),   # IPv6 zone id: '#' would end an INI value
    ("gtpu_addr", "192.0.2.10 ", "gtpu_addr"),
    ("db_uri", "mongodb://127.0.0.1:99999/open5gs", "port 99999"),
    ("db_uri", "mongodb://127.0.0.1/open 5gs", "db_uri"),
    ("db_uri", "mongodb://", "db_uri"),
    ("log_dir", "var/log/x", "log_dir"),
    ("log_dir", "/var/log/../../etc", "log_dir"),
    ("log_dir", "/etc/cron.d", "system folder"),
    ("log_dir", "/proc/self", "system folder"),
    ("apns[0].name", "inter..net", "apns[0].name"),
    ("apns[0].name", "internet-", "apns[0].name"),
])
def test_field_grammar(tmp_path, field, value, needle):
    message = _refused(_write(tmp_path, _set(_data(), field, value)))
    assert needle in message


@pytest.mark.parametrize("uri", ["mongodb://127.0.0.1:27017/open5gs", "mongodb://db1,db2:27018/open5gs?replicaSet=rs0",
                                 "mongodb://user:p%40ss@[::1]:27017/", "mongodb+srv://cluster.example/open5gs",
                                 "mongodb://127.0.0.1"])
def test_good_db_uris(tmp_path, uri):
    assert load_profile(_write(tmp_path, _set(_data(), "db_uri", uri))).db_uri == uri


def test_usr_local_var_log_is_allowed(tmp_path):
    path = _write(tmp_path, _set(_data(), "log_dir", "/usr/local/var/log/open5gs"))
    assert load_profile(path).log_dir == "/usr/local/var/log/open5gs"


# ----- cross-field rules ------------------------------------------------------------------------------
def test_gtpu_address_equal_to_the_ue_gateway_is_refused(tmp_path):
    message = _refused(_write(tmp_path, _set(_data(), "gtpu_addr", "10.45.0.1")))
    assert "gtpu_addr: 10.45.0.1 is the UE gateway" in message


def test_s1_addresses_inside_the_ue_pool_are_refused(tmp_path):
    assert "inside ue_subnet" in _refused(_write(tmp_path, _set(_data(), "mme.s1ap_addr", "10.45.3.3")))


def test_a_gbr_qci_for_the_default_bearer_is_refused(tmp_path):
    message = _refused(_write(tmp_path, _set(_data(), "apns[0].qci", 1)))
    assert "apns[0].qci" in message and "GBR QCI (1-4)" in message and "5..9" in message


def test_srsepc_serves_one_tac_and_one_apn(tmp_path):
    data = _set(_data(SRS), "tacs", [7, 8])
    data["apns"].append({"name": "ims"})
    message = _refused(_write(tmp_path, data))
    assert "srsEPC serves one TAC" in message and "srsEPC serves one APN" in message
    # rendering an Open5GS profile with two TACs as srsepc is refused too
    two = load_profile(_write(tmp_path, _set(_data(), "tacs", [7, 8]), "two.yaml"))
    with pytest.raises(InputError, match="srsEPC serves one TAC"):
        render(two, "srsepc", tmp_path / "out")


def test_srsepc_needs_ipv4_s1(tmp_path):
    data = _set(_set(_data(SRS), "mme.s1ap_addr", "2001:db8::1"), "gtpu_addr", "2001:db8::1")
    message = _refused(_write(tmp_path, data))
    assert "mme.s1ap_addr: srsEPC binds and announces IPv4 only" in message


def test_examples_still_load_and_render(tmp_path):
    for path in sorted(EXAMPLES.glob("*.yaml")):
        prof = load_profile(path)
        assert render(prof, prof.flavour, tmp_path / path.stem)
