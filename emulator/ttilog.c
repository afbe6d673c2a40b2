/* cellab-cell: the ground-truth TTI log (format in ttilog.h and README.md): header and one record per UE per TTI. */
#include "cell.h"

#include <errno.h>
#include <math.h>
#include <string.h>
#include <time.h>

#include "radio.h"
#include "ttilog.h"

#define TTILOG_BUFFER_BYTES (1 << 20)

/* What the UE could have received this TTI with the whole cell: the capacity reports compare against. */
static uint32_t dl_capacity_bytes(const struct cell *c, const struct ue *u, uint64_t t)
{
    uint64_t bits = 0;
    if (c->paused || c->p.unlimited || !ue_connected(c, u)) /* --rlf: out of connected mode, nothing to give */
        bits = 0;
    else if (c->have_trace)
        bits = u->r_tbs_bits;
    else if (u->cqi_used > 0)
        bits = (uint64_t)radio_dl_best_alloc(u->cqi_used, c->p.n_prb, c->p.n_prb, (int)(t % 10), NULL).tbs_bits;
    return bits / 8 > UINT16_MAX ? UINT16_MAX : (uint32_t)(bits / 8);
}

static void write_header(struct cell *c)
{
    struct ttilog_header h = {TTILOG_MAGIC, TTILOG_VERSION, sizeof(struct ttilog_rec), (uint16_t)c->p.n_ues,
                              (uint16_t)c->p.n_prb, 0, c->tti_log_start_unix_s};
    fwrite(&h, sizeof(h), 1, c->tti_log);
    c->tti_log_bytes = sizeof(h);
}

void write_tti_records(struct cell *c, uint64_t t)
{
    if (!c->tti_log)
        return;
    if (log_full(c->p.log_max_bytes, c->tti_log_bytes, (size_t)c->p.n_ues * sizeof(struct ttilog_rec))) {
        c->tti_log = log_rotate(c->tti_log, c->p.tti_log_path, TTILOG_BUFFER_BYTES);
        if (!c->tti_log)
            return;
        write_header(c);
    }
    c->tti_log_bytes += (uint64_t)c->p.n_ues * sizeof(struct ttilog_rec);
    for (int k = 0; k < c->p.n_ues; k++) {
        struct ue *u = &c->ue[k];
        struct ttilog_rec r = {
            .tti = (uint32_t)t, .ue = (uint16_t)k, .cqi = (uint8_t)u->cqi_used,
            .mcs = (uint8_t)(u->r_mcs < 0 ? 255 : u->r_mcs),
            .dl_queue_bytes = (uint32_t)(u->dlq.bytes > UINT32_MAX ? UINT32_MAX : u->dlq.bytes),
            .dl_tbs_bits = u->r_tbs_bits, .dl_delivered_bytes = u->r_delivered,
            .ul_buffer_bytes = (uint32_t)(u->ulq.bytes > UINT32_MAX ? UINT32_MAX : u->ulq.bytes),
            .ul_grant_bytes = u->r_ul_grant, .ul_delivered_bytes = u->r_ul_delivered,
            .dl_drop_bytes = u->r_drop_bytes, .dl_prb = (uint16_t)u->r_prb, .harq_retx = (uint8_t)u->r_retx,
            .flags = (uint8_t)(u->r_flags | (c->paused ? TTILOG_PAUSED : 0)),
            .sinr_db_x100 = (int16_t)lround(u->sinr_db * 100.0),
            .dl_capacity_bytes = (uint16_t)dl_capacity_bytes(c, u, t)};
        fwrite(&r, sizeof(r), 1, c->tti_log);
    }
}

/* Open --tti-log (if given) and write the header; the records follow, flushed every telemetry period. */
void ttilog_open(struct cell *c)
{
    if (!c->p.tti_log_path)
        return;
    c->tti_log = log_create(c->p.tti_log_path, TTILOG_BUFFER_BYTES);
    if (!c->tti_log)
        die("--tti-log %s: %s", c->p.tti_log_path, strerror(errno));
    c->tti_log_start_unix_s = (int64_t)time(NULL);
    write_header(c);
    fflush(c->tti_log);
}
