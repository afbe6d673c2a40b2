"""Hostile eNB profiles a real srsenb would refuse (or would run on a carrier outside its band): each is refused
by `load_profile` and by `cellab validate`, naming the file, the field and the allowed values, no traceback.
Band facts: TS 36.101 Table 5.7.3-1 (/work/shared/data/3gpp/lte_bands_36101.csv)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from cellab.errors import InputError, InputErrors
from cellab.ran.bands import band_of, carrier
from cellab.ran.profile import load_profile
from cellab.testkit.helpers import run_cellab

pytestmark = pytest.mark.background  # no clock, no root

ZMQ = Path(__file__).resolve().parents[1] / "examples" / "zmq-25prb.yaml"


def profile(tmp_path: Path, **sections: dict) -> Path:
    data = yaml.safe_load(ZMQ.read_text())
    for section, values in sections.items():
        if section == "cell":
            data["cells"][0].update(values)
        else:
            data.setdefault(section, {}).update(values)
    path = tmp_path / "enb.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


HOSTILE = [
    # a downlink EARFCN in no band: between bands 8 (..3799) and 12 (5010..), above band 28, in band 66's gap
    ("earfcn-gap-8-12", {"cell": {"dl_earfcn": 4000}}, "cells[0].dl_earfcn"),
    ("earfcn-above-28", {"cell": {"dl_earfcn": 9700}}, "cells[0].dl_earfcn"),
    ("earfcn-tdd-band-38", {"cell": {"dl_earfcn": 38000}}, "cells[0].dl_earfcn"),  # srsENB runs FDD cells
    ("earfcn-max", {"cell": {"dl_earfcn": 262143}}, "cells[0].dl_earfcn"),
    # carriers whose channel falls outside the band's edges
    ("band7-low-edge", {"cell": {"dl_earfcn": 2750}}, "cells[0].dl_earfcn"),
    ("band7-high-edge", {"cell": {"dl_earfcn": 3449}}, "cells[0].dl_earfcn"),
    ("band1-20mhz-at-edge", {"cell": {"dl_earfcn": 50}, "enb": {"n_prb": 100},
                             "rf": {"device": {"kind": "zmq", "base_srate_hz": 23.04e6}}}, "cells[0].dl_earfcn"),
    ("band13-10mhz", {"cell": {"dl_earfcn": 5200}, "enb": {"n_prb": 50},
                      "rf": {"device": {"kind": "zmq", "base_srate_hz": 15.36e6}}}, "cells[0].dl_earfcn"),
    # a PRACH beyond a small carrier: prach_freq_offset + 6 > n_prb
    ("prach-6prb", {"enb": {"n_prb": 6}, "prach": {"freq_offset": 1},
                    "rf": {"device": {"kind": "zmq", "base_srate_hz": 1.92e6}}}, "prach.freq_offset"),
    ("prach-15prb", {"enb": {"n_prb": 15}, "prach": {"freq_offset": 12},
                     "rf": {"device": {"kind": "zmq", "base_srate_hz": 3.84e6}}}, "prach.freq_offset"),
    ("prach-25prb-end", {"prach": {"freq_offset": 20}}, "prach.freq_offset"),
    ("prach-max", {"prach": {"freq_offset": 94}}, "prach.freq_offset"),
    # an SR offset not below its period
    ("sr-offset-eq-period", {"sr": {"period_ms": 5, "subframe_offset": 5}}, "sr.subframe_offset"),
    ("sr-offset-above", {"sr": {"period_ms": 10, "subframe_offset": 79}}, "sr.subframe_offset"),
    ("sr-offset-negative", {"sr": {"period_ms": 10, "subframe_offset": -1}}, "sr.subframe_offset"),
    ("sr-period-not-allowed", {"sr": {"period_ms": 2}}, "sr.period_ms"),
    ("cqi-offset-eq-period", {"cqi": {"period_ms": 2, "subframe_offset": 2}}, "cqi.subframe_offset"),
]


@pytest.mark.parametrize("case, change, field", HOSTILE, ids=[h[0] for h in HOSTILE])
def test_a_profile_srsenb_would_refuse_is_refused(tmp_path, case, change, field):
    path = profile(tmp_path, **change)
    with pytest.raises((InputError, InputErrors)) as info:
        load_profile(path)
    message = str(info.value)
    assert "enb.yaml" in message and field in message, message
    assert "allowed" in message or "greater than or equal to 0" in message, message


@pytest.mark.parametrize("case, change, field", HOSTILE[::4], ids=[h[0] for h in HOSTILE[::4]])
def test_validate_refuses_it_without_a_traceback(tmp_path, case, change, field):
    result = run_cellab("validate", str(profile(tmp_path, **change)))
    assert result.returncode != 0
    assert "Traceback" not in result.stdout + result.stderr
    assert field in result.stdout + result.stderr


@pytest.mark.parametrize("earfcn, n_prb, srate", [(2775, 25, 23.04e6), (3425, 25, 23.04e6), (68611, 25, 23.04e6),
                                                  (100, 100, 23.04e6)])
def test_carriers_inside_their_band_load(tmp_path, earfcn, n_prb, srate):
    """The edges are where the channel fits exactly: 2.5 MHz above band 7's 2620 MHz is EARFCN 2775."""
    path = profile(tmp_path, cell={"dl_earfcn": earfcn}, enb={"n_prb": n_prb},
                   rf={"device": {"kind": "zmq", "base_srate_hz": srate}})
    assert load_profile(path).cells[0].dl_earfcn == earfcn


def test_band_table_matches_the_3gpp_file():
    """Every band in the shared TS 36.101 table that is FDD is known with the same numbers."""
    table = Path(__file__).resolve().parents[3] / "shared" / "data" / "3gpp" / "lte_bands_36101.csv"
    if not table.exists():
        pytest.skip(f"{table} is not on this host")
    for line in table.read_text().splitlines():
        if line.startswith(("#", "band")):
            continue
        band, fdl_low, n_offs_dl, n_dl_end, n_offs_ul, duplex = line.split(",")
        if int(n_offs_ul) == 0:
            assert band_of(int(n_offs_dl)) is None, f"band {band} is TDD: srsENB's cells are FDD"
            continue
        found = band_of(int(n_offs_dl))
        assert found is not None and found.band == int(band), band
        assert found.n_dl_max == int(n_dl_end) - 1
        assert carrier(int(n_offs_dl)).dl_mhz == float(fdl_low)
        assert found.n_offs_ul == int(n_offs_ul)
