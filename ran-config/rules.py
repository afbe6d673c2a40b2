"""The rules srsENB enforces across fields (anchors.md §1.2-1.3), checked on the controller.

Each rule returns InputErrors naming the profile file, the field and the allowed values, so a bad profile
fails here and not as a console line on the lab host.
"""

from __future__ import annotations

from pathlib import Path

from cellab.errors import InputError
from cellab.ran.bands import BANDWIDTH_MHZ, allowed_ranges, band_of, fits_in_band
from cellab.ran.profile import EnbProfile
from cellab.ran.uhd_args import master_clock_hz

PRACH_PRBS = 6  # a PRACH preamble spans 6 PRBs


def pucch_edge_prbs(profile: EnbProfile) -> int:
    """PRBs at each band edge that PUCCH occupies: srsENB takes max(SR nof_prb, n_rb_cqi)."""
    return max(profile.sr.nof_prb, profile.pucch.n_rb_cqi)


def max_sr_nof_prb(n_prb: int) -> int:
    # 6-PRB cells keep one PUCCH PRB per edge (srsENB forces the PRACH to offset 0 there)
    return 1 if n_prb == 6 else (n_prb - PRACH_PRBS) // 2


def prach_offsets(profile: EnbProfile) -> range:
    n_prb = profile.enb.n_prb
    if n_prb == 6:
        return range(0, 1)
    edge = pucch_edge_prbs(profile)
    return range(edge, n_prb - edge - PRACH_PRBS + 1)


def check_rules(profile: EnbProfile, source: str | Path) -> list[InputError]:
    errors: list[InputError] = []
    n_prb = profile.enb.n_prb

    sr_max = max_sr_nof_prb(n_prb)
    if profile.sr.nof_prb > sr_max:
        errors.append(InputError(source, "sr.nof_prb", f"{profile.sr.nof_prb} SR PRBs per edge leave no room for "
                                 f"the PRACH in a {n_prb}-PRB cell", [f"1..{sr_max}"]))
    offsets = prach_offsets(profile)
    if profile.prach.freq_offset not in offsets:
        where = ("a 6-PRB cell has room for the PRACH at offset 0 only" if n_prb == 6 else
                 f"PRBs 0..{pucch_edge_prbs(profile) - 1} and {n_prb - pucch_edge_prbs(profile)}..{n_prb - 1} "
                 "are PUCCH (max of sr.nof_prb, pucch.n_rb_cqi)")
        allowed = [f"{offsets.start}..{offsets.stop - 1}"] if len(offsets) else ["none: lower sr.nof_prb/n_rb_cqi"]
        errors.append(InputError(source, "prach.freq_offset", f"PRACH PRBs {profile.prach.freq_offset}.."
                                 f"{profile.prach.freq_offset + PRACH_PRBS - 1} fall in the PUCCH region or outside "
                                 f"the cell: {where}", allowed))
    if profile.sr.subframe_offset is not None and profile.sr.subframe_offset >= profile.sr.period_ms:
        errors.append(InputError(source, "sr.subframe_offset", f"{profile.sr.subframe_offset} is not inside the "
                                 f"{profile.sr.period_ms} ms SR period", [f"0..{profile.sr.period_ms - 1}"]))
    if profile.cqi.subframe_offset is not None and profile.cqi.subframe_offset >= profile.cqi.period_ms:
        errors.append(InputError(source, "cqi.subframe_offset", f"{profile.cqi.subframe_offset} is not inside the "
                                 f"{profile.cqi.period_ms} ms CQI period", [f"0..{profile.cqi.period_ms - 1}"]))
    if profile.scheduler.min_aggr_level > profile.scheduler.max_aggr_level:
        errors.append(InputError(source, "scheduler.min_aggr_level", "is above max_aggr_level",
                                 [f"0..{profile.scheduler.max_aggr_level}"]))

    for i, cell in enumerate(profile.cells):
        band = band_of(cell.dl_earfcn)
        if band is None:
            errors.append(InputError(source, f"cells[{i}].dl_earfcn", f"{cell.dl_earfcn} is in no E-UTRA FDD band "
                                     "(TS 36.101 Table 5.7.3-1)", allowed_ranges()))
        elif not fits_in_band(cell.dl_earfcn, n_prb):
            errors.append(InputError(source, f"cells[{i}].dl_earfcn", f"a {BANDWIDTH_MHZ[n_prb]} MHz carrier at EARFCN "
                                     f"{cell.dl_earfcn} sticks out of band {band.band}",
                                     [f"band {band.band}: {band.n_offs_dl}-{band.n_dl_max} with the channel inside"]))
        if cell.rf_port != i:
            errors.append(InputError(source, f"cells[{i}].rf_port", f"{cell.rf_port}: RF ports must be in order "
                                     "starting with 0, one per cell", [i]))
    ids = [cell.cell_id for cell in profile.cells]
    for i, cell_id in enumerate(ids):
        if cell_id in ids[:i]:
            errors.append(InputError(source, f"cells[{i}].cell_id", f"{cell_id} is used by another cell",
                                     ["a cell_id unique in this eNB"]))

    device = profile.rf.device
    if device.kind == "uhd" and device.master_clock_rate_hz is None and master_clock_hz(device.family, n_prb) is None:
        errors.append(InputError(source, "rf.device.master_clock_rate_hz", f"no {device.family} master clock divides "
                                 f"the {n_prb}-PRB sample rate: give one, or choose another n_prb",
                                 ["a rate that is an integer multiple of the sample rate"]))
    return errors
