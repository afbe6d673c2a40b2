"""Traces `cellab validate` accepts are the traces the cell reads, and the other way round: one grammar
(emulator/trace.h) for cellab's validator (cellab.campaign.traces.read_mahimahi) and the cell's parser
(trace.c), shown by feeding the same hostile files to both. Before, the validator took blank lines, digit
separators ('1_000'), tabs, blanks and non-ASCII digits ('١٢') that the cell refused or read otherwise."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from cellab.campaign.traces import read_mahimahi
from cellab.errors import InputError
from cellab.paths import find_program

pytestmark = pytest.mark.background  # no clock, no root: the cell stops before any namespace

HOSTILE = {
    "blank-line": b"1\n\n2\n",
    "blank-last-line": b"1\n2\n\n",
    "only-newlines": b"\n\n",
    "empty": b"",
    "digit-separator": b"1\n1_000\n",
    "leading-tab": b"1\n\t2\n",
    "trailing-tab": b"1\n2\t\n",
    "leading-blank": b"1\n 2\n",
    "trailing-blank": b"1\n2 \n",
    "arabic-indic-digits": "1\n١٢\n".encode(),
    "fullwidth-digits": "1\n２\n".encode(),
    "superscript": "1\n²\n".encode(),
    "plus-sign": b"1\n+2\n",
    "minus-sign": b"1\n-2\n",
    "blank-then-minus": b"1\n -2\n",
    "nul-after-digits": b"1\n2\x00junk\n",
    "nul-line": b"1\n\x00\n",
    "byte-order-mark": b"\xef\xbb\xbf1\n2\n",
    "not-utf8": b"1\n\xff\n",
    "vertical-tab": b"1\x0b2\n",
    "form-feed": b"1\n2\x0c\n",
    "unicode-line-separator": "1\u20282\n".encode(),
    "cr-only": b"1\r2\r",
    "float": b"1\n2.0\n",
    "exponent": b"1\n1e3\n",
    "hex": b"1\n0x10\n",
    "long-line": b"1\n" + b"0" * 200 + b"2\n",
    "too-many-digits": b"1\n0000000000002\n",
    "beyond-a-day": b"1\n86400001\n",
    "goes-back": b"5\n3\n",
    "lasts-no-time": b"0\n0\n",
    "huge-number": b"1\n" + b"9" * 30 + b"\n",
}
GOOD = {
    "plain": b"1\n2\n3\n",
    "no-last-newline": b"1\n2\n3",
    "crlf": b"1\r\n2\r\n",
    "leading-zeros": b"0001\n0002\n",
    "a-day": b"0\n86400000\n",
    "repeats": b"5\n5\n5\n",
}


def cell_reads(path: Path) -> bool:
    """Whether cellab-cell accepts the trace: it parses --trace before touching any namespace, then stops at
    the (absent) namespace when the trace was good."""
    out = subprocess.run([str(find_program("cellab-cell")), "--srv", "nosuch-srv:lte0", "--ue",
                          "nosuch-ue0:lte0:10.0.0.2", "--trace", str(path)],
                         capture_output=True, text=True, timeout=10, check=False)
    assert out.returncode != 0, out.stderr  # it never gets past the namespaces
    return "--trace:" not in out.stderr


def validator_reads(path: Path) -> bool:
    try:
        read_mahimahi(path)
    except InputError as exc:
        assert str(path) in str(exc)  # names the file
        return False
    return True


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_hostile_trace_is_refused_by_both(tmp_path, name):
    path = tmp_path / f"{name}.down"
    path.write_bytes(HOSTILE[name])
    assert (validator_reads(path), cell_reads(path)) == (False, False)


@pytest.mark.parametrize("name", sorted(GOOD))
def test_a_good_trace_is_read_by_both(tmp_path, name):
    path = tmp_path / f"{name}.down"
    path.write_bytes(GOOD[name])
    assert (validator_reads(path), cell_reads(path)) == (True, True)


def test_the_validator_reads_the_numbers_the_cell_reads(tmp_path):
    path = tmp_path / "t.down"
    path.write_bytes(b"0003\r\n7\n7\n12")
    assert read_mahimahi(path) == [3, 7, 7, 12]


def test_the_error_names_the_line(tmp_path):
    path = tmp_path / "t.down"
    path.write_bytes(b"1\n2\n1_000\n")
    with pytest.raises(InputError, match=r"line 3: '1_000' is not a time in ms \(allowed: 1 to 12 ASCII digits"):
        read_mahimahi(path)
