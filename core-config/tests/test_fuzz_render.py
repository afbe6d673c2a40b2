"""Configuration injection, fuzzed (issue 27): any string in any text field of a core profile, read through the
loader or handed to the renderer unvalidated, either is refused naming the field (nothing written) or renders
files with exactly the keys and sections the pristine profile renders: a value can change a value, never the
file's structure. The examples in test_injection.py are the known payloads; this generates the rest."""

from __future__ import annotations

import configparser
import tempfile
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cellab.epc.profile import load_profile
from cellab.epc.render import render
from cellab.errors import InputError, InputErrors

from .test_injection import FLAVOURS, LAB, SRS, TEXT_FIELDS, _data, _set, _unvalidated

pytestmark = pytest.mark.background  # no clock, no root: beside a lab test at SCHED_IDLE (conftest.py)

RENDER_FUZZ = settings(max_examples=30, deadline=None, database=None,
                       suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
# characters that are syntax somewhere in the four formats, line breaks of every kind, and the look-alikes
SYNTAX = "\n\r\t\x00\x0b\x0c\x85\u2028\u2029 #;:=[]{}\"'\\,&*!|>%@`-?"
hostile = st.one_of(
    st.text(alphabet=st.sampled_from(SYNTAX + "abc019./"), max_size=40),
    st.text(max_size=30),
    st.builds(lambda head, tail: head + tail, st.sampled_from(["cellab", "192.0.2.10", "mongodb://h/db",
                                                               "/var/log/x", "internet", "001"]),
              st.text(alphabet=st.sampled_from(SYNTAX + "xyz"), min_size=1, max_size=20)),
)


def _structure(folder: Path) -> dict[str, object]:
    """Each rendered file's shape: YAML key paths (list items folded), INI sections and keys, freeDiameter's
    `Key = value;` keys, the CSV's header."""
    shape: dict[str, object] = {}
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        name, text = str(path.relative_to(folder)), path.read_text(errors="replace")
        if path.parent.name == "freeDiameter":
            shape[name] = sorted(line.split("=", 1)[0].strip() for line in text.splitlines()
                                 if line.strip() and not line.lstrip().startswith("#"))
        elif path.name == "epc.conf":
            ini = configparser.ConfigParser(interpolation=None, strict=True)
            ini.read_string(text)
            shape[name] = {s: sorted(ini[s]) for s in ini.sections()}
        elif path.suffix in (".yaml", ".conf"):  # NextEPC's .conf files are YAML
            shape[name] = sorted(_key_paths(yaml.safe_load(text)))
        else:
            shape[name] = text.splitlines()[:1]
    return shape


def _key_paths(node: object, prefix: str = "") -> set[str]:
    if isinstance(node, dict):
        return {p for k, v in node.items() for p in {f"{prefix}.{k}", *_key_paths(v, f"{prefix}.{k}")}}
    if isinstance(node, list):
        return {p for item in node for p in _key_paths(item, prefix + "[]")}
    return set()


PRISTINE: dict[tuple[str, str], dict[str, object]] = {}


def _pristine(source: Path, flavour: str) -> dict[str, object]:
    if (str(source), flavour) not in PRISTINE:
        with tempfile.TemporaryDirectory() as tmp:
            render(load_profile(source), flavour, Path(tmp))
            PRISTINE[(str(source), flavour)] = _structure(Path(tmp))
    return PRISTINE[(str(source), flavour)]


def _render_keeps_shape(profile, source: Path, flavour: str, field: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out"
        try:
            render(profile, flavour, out)
        except InputError as exc:
            assert exc.field and exc.allowed, exc  # names the key and the allowed form
            assert not out.exists() or not any(p.is_file() for p in out.rglob("*")), "a refused render wrote files"
            return
        assert _structure(out) == _pristine(source, flavour), f"{field} changed {flavour}'s file structure"


@pytest.mark.parametrize("field", TEXT_FIELDS)
@settings(RENDER_FUZZ, max_examples=15)  # each renders 7 flavour-source pairs
@given(value=hostile)
def test_a_loaded_profile_never_changes_a_rendered_files_shape(field, value):
    with tempfile.TemporaryDirectory() as tmp:
        for source in (LAB, SRS):
            path = Path(tmp) / "core.yaml"
            path.write_text(yaml.safe_dump(_set(_data(source), field, value)))
            try:
                profile = load_profile(path)
            except (InputError, InputErrors) as exc:  # one error (a number out of range) or the list
                assert f"{path}: {field}" in str(exc), str(exc)
                continue
            for flavour in FLAVOURS:
                if flavour == "srsepc" and source is LAB:
                    continue  # two TACs / APNs: refused for srsEPC by rule, tested in test_injection.py
                _render_keeps_shape(profile, source, flavour, field)


@pytest.mark.parametrize("field", [f for f in TEXT_FIELDS if f != "ue_subnet"])
@RENDER_FUZZ
@given(value=hostile)
def test_an_unvalidated_profile_never_changes_a_rendered_files_shape(field, value):
    for flavour in FLAVOURS:
        source = SRS if flavour == "srsepc" else LAB
        _render_keeps_shape(_unvalidated(load_profile(source), field, value), source, flavour, field)
