"""E-UTRA FDD operating bands and the EARFCN <-> carrier frequency rule (TS 36.101 §5.7.3, Table 5.7.3-1).

F_DL = F_DL_low + 0.1 (N_DL - N_Offs-DL) MHz, F_UL likewise; the default uplink EARFCN is the downlink one
plus the band's (N_Offs-UL - N_Offs-DL). srsENB runs FDD cells, so only FDD bands are listed.
"""

from __future__ import annotations

from typing import NamedTuple


class Band(NamedTuple):
    band: int
    f_dl_low_mhz: float
    n_offs_dl: int
    n_dl_max: int  # last DL EARFCN of the band
    f_ul_low_mhz: float
    n_offs_ul: int
    n_ul_max: int | None = None  # last UL EARFCN, when the uplink is narrower than the downlink (band 66)

    @property
    def f_dl_high_mhz(self) -> float:
        # the band's upper edge: one 100 kHz raster step past its last EARFCN
        return round(self.f_dl_low_mhz + 0.1 * (self.n_dl_max - self.n_offs_dl + 1), 1)

    @property
    def last_ul_earfcn(self) -> int:
        return self.n_ul_max if self.n_ul_max is not None else self.n_offs_ul + self.n_dl_max - self.n_offs_dl

    @property
    def f_ul_high_mhz(self) -> float:
        return round(self.f_ul_low_mhz + 0.1 * (self.last_ul_earfcn - self.n_offs_ul + 1), 1)


# band, F_DL_low (MHz), N_Offs-DL, last N_DL, F_UL_low (MHz), N_Offs-UL
FDD_BANDS: tuple[Band, ...] = (
    Band(1, 2110.0, 0, 599, 1920.0, 18000),
    Band(2, 1930.0, 600, 1199, 1850.0, 18600),
    Band(3, 1805.0, 1200, 1949, 1710.0, 19200),
    Band(4, 2110.0, 1950, 2399, 1710.0, 19950),
    Band(5, 869.0, 2400, 2649, 824.0, 20400),
    Band(7, 2620.0, 2750, 3449, 2500.0, 20750),
    Band(8, 925.0, 3450, 3799, 880.0, 21450),
    Band(12, 729.0, 5010, 5179, 699.0, 23010),
    Band(13, 746.0, 5180, 5279, 777.0, 23180),
    Band(14, 758.0, 5280, 5379, 788.0, 23280),
    Band(17, 734.0, 5730, 5849, 704.0, 23730),
    Band(18, 860.0, 5850, 5999, 815.0, 23850),
    Band(19, 875.0, 6000, 6149, 830.0, 24000),
    Band(20, 791.0, 6150, 6449, 832.0, 24150),
    Band(25, 1930.0, 8040, 8689, 1850.0, 26040),
    Band(26, 859.0, 8690, 9039, 814.0, 26690),
    Band(28, 758.0, 9210, 9659, 703.0, 27210),
    Band(66, 2110.0, 66436, 67335, 1710.0, 131972, 132671),  # DL 2110-2200 MHz, UL only 1710-1780 MHz
    Band(71, 617.0, 68586, 68935, 663.0, 133122),
)

# channel bandwidth per n_prb (TS 36.101 Table 5.6-1)
BANDWIDTH_MHZ = {6: 1.4, 15: 3.0, 25: 5.0, 50: 10.0, 75: 15.0, 100: 20.0}


class Carrier(NamedTuple):
    band: int
    dl_earfcn: int
    ul_earfcn: int
    dl_mhz: float
    ul_mhz: float


def band_of(dl_earfcn: int) -> Band | None:
    for band in FDD_BANDS:
        if band.n_offs_dl <= dl_earfcn <= band.n_dl_max:
            return band
    return None


def allowed_ranges() -> list[str]:
    return [f"band {b.band}: {b.n_offs_dl}-{b.n_dl_max}" for b in FDD_BANDS]


def carrier(dl_earfcn: int) -> Carrier:
    band = band_of(dl_earfcn)
    if band is None:
        raise ValueError(f"DL EARFCN {dl_earfcn} is in no E-UTRA FDD band")
    dl_mhz = round(band.f_dl_low_mhz + 0.1 * (dl_earfcn - band.n_offs_dl), 1)
    ul_earfcn = dl_earfcn - band.n_offs_dl + band.n_offs_ul
    ul_mhz = round(band.f_ul_low_mhz + 0.1 * (ul_earfcn - band.n_offs_ul), 1)
    return Carrier(band.band, dl_earfcn, ul_earfcn, dl_mhz, ul_mhz)


def fits_in_band(dl_earfcn: int, n_prb: int) -> bool:
    """The whole channel (carrier ± bandwidth/2) lies inside the band's downlink range."""
    band = band_of(dl_earfcn)
    if band is None:
        return False
    half_mhz = BANDWIDTH_MHZ[n_prb] / 2
    dl_mhz = band.f_dl_low_mhz + 0.1 * (dl_earfcn - band.n_offs_dl)
    return dl_mhz - half_mhz >= band.f_dl_low_mhz - 1e-6 and dl_mhz + half_mhz <= band.f_dl_high_mhz + 1e-6


def ul_fits_in_band(dl_earfcn: int, n_prb: int) -> bool:
    """The uplink channel at the default duplex distance lies inside the band's uplink range (where the
    uplink is narrower than the downlink, as in band 66, a DL carrier near the top has no uplink)."""
    band = band_of(dl_earfcn)
    if band is None:
        return False
    half_mhz = BANDWIDTH_MHZ[n_prb] / 2
    ul_earfcn = dl_earfcn - band.n_offs_dl + band.n_offs_ul
    if ul_earfcn > band.last_ul_earfcn:
        return False
    ul_mhz = band.f_ul_low_mhz + 0.1 * (ul_earfcn - band.n_offs_ul)
    return ul_mhz - half_mhz >= band.f_ul_low_mhz - 1e-6 and ul_mhz + half_mhz <= band.f_ul_high_mhz + 1e-6
