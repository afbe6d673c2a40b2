/* cellab-cell: the downlink channel of one UE: attenuation and fading -> RSRP -> SINR -> CQI, periodic CQI reports
 * used after their delay, corrected by outer-loop link adaptation. */
#include "cell.h"

#include <math.h>

#include "radio.h"

void channel_update(struct cell *c, struct ue *u, uint64_t t)
{
    if (c->p.fading_sigma_db > 0) {
        /* Gauss-Markov shadow fading: correlation exp(-1/coherence) per TTI, stationary sigma. */
        double rho = exp(-1.0 / c->p.fading_coherence_ms);
        u->fading_db = rho * u->fading_db + sqrt(1 - rho * rho) * c->p.fading_sigma_db * rng_normal(c);
    }
    u->rsrp_dbm = radio_rsrp_dbm(u->attenuation_db, u->fading_db);
    u->sinr_db = radio_sinr_db(u->rsrp_dbm);
    u->cqi_true = radio_cqi(u->sinr_db);
    int k = (int)(u - c->ue);
    /* periodic CQI: measured now, usable by the scheduler cqi_delay_ms later */
    if ((t + (uint64_t)k) % (uint64_t)c->p.cqi_period_ms == 0) {
        u->sinr_pending_db = u->sinr_db;
        u->cqi_pending_at = t + (uint64_t)c->p.cqi_delay_ms;
        u->cqi_pending_at_valid = 1;
    }
    if (u->cqi_pending_at_valid && t >= u->cqi_pending_at) {
        u->sinr_reported_db = u->sinr_pending_db;
        u->cqi_pending_at_valid = 0;
    }
    /* the CQI the scheduler uses: the last report, corrected by outer-loop link adaptation */
    u->cqi_used = radio_cqi(u->sinr_reported_db + u->olla_db);
}
