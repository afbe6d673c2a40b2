/* Radio model of the virtual cell: attenuation -> RSRP -> SINR -> CQI, TBS selection, BLER. */
#ifndef CELLAB_RADIO_H
#define CELLAB_RADIO_H

#include <stdint.h>

/* RS EPRE (dBm per 15 kHz resource element) at the UE's antenna port with 0 dB on the attenuator.
 * A conducted shield-box setup: a USRP at about 0 dBm total output over 1200 subcarriers (-31 dBm per RE)
 * minus about 29 dB of fixed cabling, splitter and coupler loss. With it 0-34 dB attenuation keeps CQI 15 and
 * the link ends near 61 dB (RSRP -121 dBm, where phones lose a real cell), inside the lab attenuators' range. */
#define RADIO_RS_EPRE_AT_0DB_DBM (-60.0)
/* Thermal noise per RE: -174 dBm/Hz + 10*log10(15 kHz) = -132.2 dBm, plus a UE noise figure of 9 dB
 * (the value TS 36.101 uses for reference sensitivity). */
#define RADIO_NOISE_PER_RE_DBM (-132.24 + 9.0)
/* Receiver implementation limit (EVM): SINR never exceeds this, however strong the signal. 40 dB lets CQI 15
 * run at practically zero BLER, as over srsRAN's ZMQ radio. */
#define RADIO_SINR_CAP_DB 40.0
/* Slope of the BLER waterfall (per dB) around the 10%-BLER SNR of each CQI: turbo codes fall from 10% to
 * about 1% BLER within 1 dB. */
#define RADIO_BLER_SLOPE_PER_DB 2.3

struct radio_alloc {
    int mcs;      /* downlink MCS (0..28) */
    int i_tbs;    /* TBS index */
    int tbs_bits; /* transport block size */
};

double radio_rsrp_dbm(double attenuation_db, double fading_db);
double radio_sinr_db(double rsrp_dbm);
int radio_cqi(double sinr_db);
/* PDSCH resource elements in n_prb PRBs of subframe sf (0..9) of a cell with cell_prb PRBs. */
int radio_pdsch_re(int cell_prb, int n_prb, int sf);
/* Largest MCS whose code rate fits the CQI's efficiency on the REs at hand (as an eNB's link adaptation). */
struct radio_alloc radio_dl_alloc(int cqi, int cell_prb, int n_prb, int sf);
/* The allocation of at most max_prb PRBs carrying the largest TB (fewest PRBs on a tie). Not always
 * max_prb: the MCS steps of TS 36.213 Table 7.1.7.2.1-1 let a few PRBs fewer clear the next MCS. */
struct radio_alloc radio_dl_best_alloc(int cqi, int cell_prb, int max_prb, int sf, int *n_prb_out);
/* Probability that a TB of this size on these REs fails at this SINR. */
double radio_bler(double sinr_db, int tbs_bits, int n_re);
int radio_ul_tbs_bits(int ul_mcs, int n_prb);

#endif
