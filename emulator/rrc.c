/* cellab-cell: the UE's RRC connection under a failing radio link (only with --rlf; emulator/README.md "Radio
 * link failure"). Radio link monitoring as TS 36.331 5.3.11 with the timers srsenb's SIB2 broadcasts (sib.conf:
 * t310 200 ms, n310 1, n311 1, t311 10000 ms): once per radio frame the UE is out of sync when its downlink is
 * out of range (CQI 0); N310 consecutive out-of-sync frames start T310, N311 in-sync frames stop it, and T310
 * expiring is a radio link failure: the UE leaves connected mode (no scheduling either way, its uplink grants
 * and the eNB's HARQ processes dropped) and looks for the cell while T311 runs. When the cell is back in sync it
 * re-establishes (reest_ms later it is connected again; RLC UM re-establishment discards the SDUs still queued,
 * TS 36.322 5.4) unless the eNB has released its context (rlf_release_ms after the failure, srsenb's
 * rlf_release_timer_ms), in which case, as after T311 expired, it sets up a new connection (connect_ms). Every
 * transition is an event on stdout, with its TTI and CLOCK_MONOTONIC time. An eNB restart (control op set_enb,
 * fault enb_restart) takes every context at once; the UEs find out as from a lost radio link. */
#include "cell.h"

#include <stdio.h>
#include <string.h>

void cell_event(struct cell *c, const char *event, int ue, const char *extra_json)
{
    stdout_log_room(c, 160 + (extra_json ? strlen(extra_json) : 0));
    printf("{\"event\": \"%s\", \"tti\": %llu, \"mono_ns\": %llu", event, (unsigned long long)c->tti,
           (unsigned long long)now_ns());
    if (ue >= 0)
        printf(", \"ue\": %d", ue);
    if (extra_json && extra_json[0])
        printf(", %s", extra_json);
    fputs("}\n", stdout);
    fflush(stdout);
}

/* out of connected mode: the UE's MAC is reset (uplink grants, BSR, SR pending) and the eNB's HARQ too */
static void leave_connected(struct cell *c, struct ue *u, uint64_t t)
{
    for (int i = 0; i < CELL_UL_HARQ_PROCS; i++)
        u->grants[i].active = 0;
    u->bsr_bytes = u->bsr_pending = 0;
    u->poll_pusch_tti = 0;
    u->sr_waiting = 0;
    dl_reset_harq(c, u, t);
}

static void flush_dl(struct cell *c, struct ue *u, uint64_t t, int k, const char *why)
{
    dl_reset_harq(c, u, t);
    uint64_t bytes = dl_discard_all_new(c, u, t);
    if (bytes) {
        char extra[96];
        snprintf(extra, sizeof(extra), "\"bytes\": %llu, \"why\": \"%s\"", (unsigned long long)bytes, why);
        cell_event(c, "dl_flush", k, extra);
    }
}

static void connected_again(struct cell *c, struct ue *u, uint64_t t, int k, const char *event)
{
    u->rrc_state = RRC_CONNECTED;
    u->t310_on = u->n_oos = u->n_is = 0;
    u->ctx_released = 0;
    flush_dl(c, u, t, k, "rlc re-establishment");
    char extra[64];
    snprintf(extra, sizeof(extra), "\"since_rlf_ms\": %llu", (unsigned long long)(t - u->rlf_tti));
    cell_event(c, event, k, extra);
}

static void radio_link_failure(struct cell *c, struct ue *u, uint64_t t, const char *extra_json)
{
    u->rrc_state = RRC_SEARCH;
    u->t310_on = 0;
    u->rlf_tti = t;
    u->enb_release_tti = t + (uint64_t)c->p.rlf_release_ms;
    u->rlf_count++;
    leave_connected(c, u, t);
    cell_event(c, "rlf", (int)(u - c->ue), extra_json);
}

void rrc_tti(struct cell *c, struct ue *u, uint64_t t)
{
    /* no eNB on the air (restarting): every frame is out of sync */
    int k = (int)(u - c->ue), frame = t % 10 == 0, in_sync = u->cqi_true > 0 && !c->enb_down;
    char extra[64];
    if (u->rrc_state != RRC_CONNECTED && !u->ctx_released && t >= u->enb_release_tti) {
        u->ctx_released = 1; /* srsenb's rlf_release_timer_ms: the bearer goes, and what it held */
        cell_event(c, "context_release", k, NULL);
        flush_dl(c, u, t, k, "context released");
        if (u->rrc_state == RRC_REEST) { /* the eNB rejects the re-establishment: a new connection */
            u->rrc_state = RRC_CONNECTING;
            u->rrc_done_tti = t + (uint64_t)c->p.connect_ms;
            cell_event(c, "connect_start", k, "\"after\": \"reestablishment_reject\"");
        }
    }
    switch (u->rrc_state) {
    case RRC_CONNECTED:
        if (frame) {
            if (!in_sync) {
                u->n_is = 0;
                if (++u->n_oos >= c->p.n310 && !u->t310_on) {
                    u->t310_on = 1;
                    u->t310_start = t;
                    cell_event(c, "t310_start", k, NULL);
                }
            } else {
                u->n_oos = 0;
                if (u->t310_on && ++u->n_is >= c->p.n311) {
                    u->t310_on = u->n_is = 0;
                    snprintf(extra, sizeof(extra), "\"t310_ran_ms\": %llu", (unsigned long long)(t - u->t310_start));
                    cell_event(c, "t310_stop", k, extra);
                }
            }
        }
        if (u->t310_on && t - u->t310_start >= (uint64_t)c->p.t310_ms)
            radio_link_failure(c, u, t, NULL);
        break;
    case RRC_SEARCH:
        if (t - u->rlf_tti >= (uint64_t)c->p.t311_ms) {
            u->rrc_state = RRC_IDLE;
            cell_event(c, "t311_expiry", k, NULL);
        } else if (frame && in_sync) {
            if (u->ctx_released) {
                u->rrc_state = RRC_CONNECTING;
                u->rrc_done_tti = t + (uint64_t)c->p.connect_ms;
                cell_event(c, "connect_start", k, "\"after\": \"reestablishment_reject\"");
            } else {
                u->rrc_state = RRC_REEST;
                u->rrc_done_tti = t + (uint64_t)c->p.reest_ms;
                cell_event(c, "reest_start", k, NULL);
            }
        }
        break;
    case RRC_IDLE:
        if (frame && in_sync) {
            u->rrc_state = RRC_CONNECTING;
            u->rrc_done_tti = t + (uint64_t)c->p.connect_ms;
            cell_event(c, "connect_start", k, "\"after\": \"t311_expiry\"");
        }
        break;
    case RRC_REEST:
    case RRC_CONNECTING:
        if (!in_sync) { /* lost the cell again before the procedure finished (T301 / T300 expiry) */
            u->rrc_state = u->rrc_state == RRC_REEST ? RRC_SEARCH : RRC_IDLE;
            cell_event(c, "procedure_failed", k, NULL);
        } else if (t >= u->rrc_done_tti) {
            if (u->rrc_state == RRC_REEST)
                u->reest_count++;
            else
                u->conn_count++;
            connected_again(c, u, t, k, u->rrc_state == RRC_REEST ? "reest_complete" : "connect_complete");
        }
        break;
    }
}

/* A restarting srsenb (fault enb_restart): the process and everything it held are gone at once: every UE's
 * context (bearer, HARQ, uplink grants, the RLC queue's SDUs: dl_flush "enb restart"), and later packets from
 * the core find no bearer. The UEs learn it as from a lost radio link: no cell on the air is out of sync every
 * frame, so T310 starts and expires into a radio link failure (the UE's own timers, in rrc_tti). */
void rrc_enb_down(struct cell *c, uint64_t t)
{
    c->enb_down = 1;
    c->enb_restarts++;
    cell_event(c, "enb_down", -1, NULL);
    for (int k = 0; k < c->p.n_ues; k++) {
        struct ue *u = &c->ue[k];
        u->ctx_released = 1;
        leave_connected(c, u, t);
        flush_dl(c, u, t, k, "enb restart");
    }
}

/* The eNB on the air again, with no context: a UE that has not yet declared a radio link failure (a restart
 * shorter than T310 + a frame) finds its connection gone at its next uplink attempt (its SR unanswered, RACH
 * with an unknown C-RNTI): the model declares it at once. Every UE then sets up a new connection (the
 * re-establishment is rejected without a context: connect_ms from its first in-sync frame, rrc_tti). */
void rrc_enb_up(struct cell *c, uint64_t t)
{
    c->enb_down = 0;
    cell_event(c, "enb_up", -1, NULL);
    for (int k = 0; k < c->p.n_ues; k++)
        if (c->ue[k].rrc_state == RRC_CONNECTED)
            radio_link_failure(c, &c->ue[k], t, "\"cause\": \"enb_restart\"");
}
