/* Radio model of the virtual cell: attenuation -> RSRP -> SINR -> CQI, TBS selection, BLER. */
#include "radio.h"

#include <math.h>

#include "lte_tables.h"

double radio_rsrp_dbm(double attenuation_db, double fading_db)
{
    return RADIO_RS_EPRE_AT_0DB_DBM - attenuation_db + fading_db;
}

double radio_sinr_db(double rsrp_dbm)
{
    double sinr = rsrp_dbm - RADIO_NOISE_PER_RE_DBM;
    return sinr > RADIO_SINR_CAP_DB ? RADIO_SINR_CAP_DB : sinr;
}

int radio_cqi(double sinr_db)
{
    int cqi = 0;
    for (int c = 1; c <= 15; c++)
        if (sinr_db * 100.0 >= lte_cqi_snr10_x100[c])
            cqi = c;
    return cqi;
}

/* Control symbols: 2 (CFI 2) above 10 PRB; 3 for 6 PRB, where the PDCCH needs more symbols for the same
 * DCIs (TS 36.211 6.7: N_RB <= 10 uses 2-4 symbols). One antenna port (srsRAN's default nof_ports = 1):
 * 8 CRS REs per PRB pair, 2 of them inside the control region. */
static int ctrl_symbols(int cell_prb) { return cell_prb <= 10 ? 3 : 2; }

int radio_pdsch_re(int cell_prb, int n_prb, int sf)
{
    int re = (168 - 12 * ctrl_symbols(cell_prb) - 6) * n_prb;
    /* PSS + SSS (2 symbols, subframes 0 and 5) and PBCH (4 symbols, subframe 0) occupy the 72 central
     * subcarriers; an allocation is charged for as many of those 6 PRBs as it could cover (upper bound). */
    int central = n_prb < 6 ? n_prb : 6;
    if (sf == 0)
        re -= central * (6 * 12 - 2); /* minus the 2 CRS REs of PBCH symbol 7, already counted */
    else if (sf == 5)
        re -= central * 2 * 12;
    return re > 0 ? re : 0;
}

struct radio_alloc radio_dl_alloc(int cqi, int cell_prb, int n_prb, int sf)
{
    struct radio_alloc a = {0, 0, 0};
    if (cqi <= 0 || n_prb <= 0)
        return a;
    double max_bits = lte_cqi_eff_x10000[cqi] / 10000.0 * radio_pdsch_re(cell_prb, n_prb, sf);
    for (int mcs = 0; mcs <= 28; mcs++) {
        int itbs = lte_dl_mcs_itbs[mcs];
        int tbs = lte_tbs_bits[itbs][n_prb - 1];
        if (mcs > 0 && tbs > max_bits)
            break;
        a.mcs = mcs;
        a.i_tbs = itbs;
        a.tbs_bits = tbs;
    }
    return a;
}

struct radio_alloc radio_dl_best_alloc(int cqi, int cell_prb, int max_prb, int sf, int *n_prb_out)
{
    struct radio_alloc best = {0, 0, 0};
    int best_n = 0;
    for (int n = max_prb; n >= 1; n--) {
        struct radio_alloc a = radio_dl_alloc(cqi, cell_prb, n, sf);
        if (a.tbs_bits >= best.tbs_bits && a.tbs_bits > 0)
            best = a, best_n = n;
    }
    if (n_prb_out)
        *n_prb_out = best_n;
    return best;
}

/* SNR at 10% BLER for a code of this efficiency: linear interpolation over the CQI table's points. */
static double snr10_for_efficiency(double eff)
{
    if (eff <= lte_cqi_eff_x10000[1] / 10000.0)
        return lte_cqi_snr10_x100[1] / 100.0;
    for (int c = 2; c <= 15; c++) {
        double e0 = lte_cqi_eff_x10000[c - 1] / 10000.0, e1 = lte_cqi_eff_x10000[c] / 10000.0;
        if (eff <= e1) {
            double s0 = lte_cqi_snr10_x100[c - 1] / 100.0, s1 = lte_cqi_snr10_x100[c] / 100.0;
            return s0 + (s1 - s0) * (eff - e0) / (e1 - e0);
        }
    }
    /* beyond CQI 15: extrapolate with the last segment's slope */
    double e0 = lte_cqi_eff_x10000[14] / 10000.0, e1 = lte_cqi_eff_x10000[15] / 10000.0;
    double s0 = lte_cqi_snr10_x100[14] / 100.0, s1 = lte_cqi_snr10_x100[15] / 100.0;
    return s1 + (s1 - s0) * (eff - e1) / (e1 - e0);
}

double radio_bler(double sinr_db, int tbs_bits, int n_re)
{
    if (n_re <= 0)
        return 1.0;
    double margin_db = sinr_db - snr10_for_efficiency((double)tbs_bits / n_re);
    /* logistic waterfall through 10% at zero margin */
    return 1.0 / (1.0 + 9.0 * exp(RADIO_BLER_SLOPE_PER_DB * margin_db));
}

int radio_ul_tbs_bits(int ul_mcs, int n_prb)
{
    if (n_prb < 1)
        return 0;
    if (n_prb > 110)
        n_prb = 110;
    return lte_tbs_bits[lte_ul_mcs_itbs[ul_mcs]][n_prb - 1];
}
