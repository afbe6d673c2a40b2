/* cellab-cell: control (ZeroMQ REP, one JSON request per message) and telemetry (ZeroMQ PUB, per-UE summaries). */
#include "cell.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "radio.h"

static uint64_t err_percentile_us(const struct cell *c, double q)
{
    if (!c->err_count)
        return 0;
    uint64_t target = (uint64_t)ceil(q * (double)c->err_count), acc = 0;
    for (int i = 0; i < CELL_ERR_HIST_US; i++) {
        acc += c->err_hist[i];
        if (acc >= target)
            return (uint64_t)i;
    }
    return CELL_ERR_HIST_US - 1;
}

static void rrc_stats(struct cell *c, struct ue *u, json_t *o);

/* the RRC model on, or a fault injected: the stats then carry the fault counters */
static int faults_seen(const struct cell *c)
{
    return c->p.rlf || c->s1_cuts || c->sgi_cuts || c->host_cuts;
}

json_t *stats_json(struct cell *c)
{
    json_t *ues = json_array();
    for (int k = 0; k < c->p.n_ues; k++) {
        struct ue *u = &c->ue[k];
        json_t *o = json_pack(
            "{s:i,s:f,s:f,s:f,s:i,s:i,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:i,s:i,s:i}", "ue", k,
            "attenuation_db", u->attenuation_db, "rsrp_dbm", u->rsrp_dbm, "sinr_db", u->sinr_db, "cqi",
            u->cqi_used, "mcs", radio_dl_alloc(u->cqi_used, c->p.n_prb, c->p.n_prb, 1).mcs, "queue_bytes",
            (json_int_t)u->dlq.bytes, "delivered_bytes", (json_int_t)u->dl_delivered_bytes, "delivered_pkts",
            (json_int_t)u->dl_delivered_pkts, "dl_drop_pkts", (json_int_t)u->dl_drop_pkts, "dl_drop_bytes",
            (json_int_t)u->dl_drop_bytes, "dl_lost_pkts", (json_int_t)u->dl_lost_pkts, "harq_retx",
            (json_int_t)u->harq_retx, "ul_delivered_bytes", (json_int_t)u->ul_delivered_bytes, "ul_buffer_bytes",
            (json_int_t)u->ulq.bytes, "sr_sent", (json_int_t)u->sr_sent, "ul_grants", (json_int_t)u->grants_issued,
            "i_sr", u->i_sr, "sr_period_ms", u->sr_period_ms, "sr_offset", u->sr_offset);
        json_object_set_new(o, "olla_db", json_real(u->olla_db));
        json_object_set_new(o, "dl_discard_pkts", json_integer((json_int_t)u->dl_discard_pkts));
        json_object_set_new(o, "dl_discard_bytes", json_integer((json_int_t)u->dl_discard_bytes));
        json_object_set_new(o, "dl_queue_new_pkts", json_integer((json_int_t)u->dl_new_pkts));
        json_object_set_new(o, "ul_drop_pkts", json_integer((json_int_t)u->ul_drop_pkts));
        if (faults_seen(c)) /* only then: other runs' stats stay as they were (test_replay) */
            rrc_stats(c, u, o);
        json_array_append_new(ues, o);
    }
    json_t *late_over = json_object();
    for (int i = 0; i < CELL_N_LATE_BINS; i++) {
        char key[24];
        snprintf(key, sizeof(key), "%llu", (unsigned long long)cell_late_bins_us[i]);
        json_object_set_new(late_over, key, json_integer((json_int_t)c->late_over[i]));
    }
    json_t *out = json_pack("{s:b,s:I,s:b,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:o,s:I,s:I,s:I,s:I,s:o}", "ok", 1, "tti", (json_int_t)c->tti,
                     "paused", c->paused, "fwd_pkts", (json_int_t)c->fwd_pkts, "fwd_bytes", (json_int_t)c->fwd_bytes,
                     "no_route_pkts", (json_int_t)c->no_route_pkts, "delay_drop_pkts",
                     (json_int_t)c->delay_drop_pkts, "tun_write_drops", (json_int_t)c->tun_write_drops,
                     "late_ttis", (json_int_t)c->late_ttis, "resyncs", (json_int_t)c->resyncs,
                     "late_ttis_over_us", late_over, "late_max_us", (json_int_t)c->late_max_us,
                     "delivery_err_p50_us", (json_int_t)err_percentile_us(c, 0.5), "delivery_err_p99_us",
                     (json_int_t)err_percentile_us(c, 0.99), "delivery_err_count", (json_int_t)c->err_count, "ues",
                     ues);
    if (c->clock.n) /* on a recorded clock (absent otherwise: the replay's stats stay as they were) */
        json_object_set_new(out, "clock", clock_json(c));
    if (c->p.cpus_awake) /* asked for: whether it holds (the replay's stats stay as they were) */
        json_object_set_new(out, "cpus_awake", json_boolean(c->cpu_latency_fd >= 0));
    if (faults_seen(c)) {
        json_object_set_new(out, "enb_up", json_boolean(!c->enb_down));
        json_object_set_new(out, "enb_restarts", json_integer((json_int_t)c->enb_restarts));
        json_object_set_new(out, "host_cuts", json_integer((json_int_t)c->host_cuts));
        json_object_set_new(out, "s1_up", json_boolean(!c->s1_down));
        json_object_set_new(out, "s1_cuts", json_integer((json_int_t)c->s1_cuts));
        json_object_set_new(out, "sgi_up", json_boolean(!c->sgi_down));
        json_object_set_new(out, "sgi_cuts", json_integer((json_int_t)c->sgi_cuts));
        json_object_set_new(out, "sgi_drop_pkts", json_integer((json_int_t)c->sgi_drop_pkts));
        json_object_set_new(out, "sgi_drop_bytes", json_integer((json_int_t)c->sgi_drop_bytes));
    }
    return out;
}

/* The recorded TTIs more than CELL_STALL_MIN_US late whose deadline is at or after since_ns, oldest first, as
 * [deadline_ns, late_us]; complete is false when the ring dropped some of them. */
static json_t *stalls_json(struct cell *c, uint64_t since_ns)
{
    json_t *list = json_array();
    uint64_t first = c->n_stalls > CELL_STALL_RING ? c->n_stalls - CELL_STALL_RING : 0;
    for (uint64_t n = first; n < c->n_stalls; n++) {
        uint64_t i = n % CELL_STALL_RING;
        if (c->stalls[i].deadline_ns >= since_ns)
            json_array_append_new(list, json_pack("[I,I]", (json_int_t)c->stalls[i].deadline_ns,
                                                  (json_int_t)c->stalls[i].late_us));
    }
    int complete = first == 0 || c->stalls[first % CELL_STALL_RING].deadline_ns < since_ns;
    return json_pack("{s:b,s:o,s:b,s:i,s:I}", "ok", 1, "stalls", list, "complete", complete, "min_late_us",
                     CELL_STALL_MIN_US, "now_ns", (json_int_t)now_ns());
}

static const char *const rrc_state_names[] = {"connected", "search", "reestablishing", "idle", "connecting"};

static void rrc_stats(struct cell *c, struct ue *u, json_t *o)
{
    json_object_set_new(o, "rrc_state", json_string(c->p.rlf ? rrc_state_names[u->rrc_state] : "connected"));
    json_object_set_new(o, "rlf_count", json_integer((json_int_t)u->rlf_count));
    json_object_set_new(o, "reest_count", json_integer((json_int_t)u->reest_count));
    json_object_set_new(o, "connect_count", json_integer((json_int_t)u->conn_count));
    json_object_set_new(o, "rrc_drop_pkts", json_integer((json_int_t)u->rrc_drop_pkts));
    json_object_set_new(o, "rrc_drop_bytes", json_integer((json_int_t)u->rrc_drop_bytes));
    json_object_set_new(o, "s1_drop_pkts", json_integer((json_int_t)u->s1_drop_pkts));
    json_object_set_new(o, "s1_drop_bytes", json_integer((json_int_t)u->s1_drop_bytes));
    json_object_set_new(o, "host_up", json_boolean(!u->host_down));
    json_object_set_new(o, "host_dl_drop_pkts", json_integer((json_int_t)u->host_dl_drop_pkts));
    json_object_set_new(o, "host_dl_drop_bytes", json_integer((json_int_t)u->host_dl_drop_bytes));
    json_object_set_new(o, "host_ul_drop_pkts", json_integer((json_int_t)u->host_ul_drop_pkts));
}

static json_t *err_reply(const char *msg)
{
    return json_pack("{s:b,s:s}", "ok", 0, "error", msg);
}

static json_t *ue_from_request(struct cell *c, json_t *req, int *k, char *err, size_t err_len)
{
    json_t *jue = json_object_get(req, "ue");
    if (!json_is_integer(jue) || json_integer_value(jue) < 0 || json_integer_value(jue) >= c->p.n_ues) {
        snprintf(err, err_len, "ue: must be an integer in [0, %d]", c->p.n_ues - 1);
        return err_reply(err);
    }
    *k = (int)json_integer_value(jue);
    return NULL;
}

/* The faults the cell injects itself, each an up/down switch with an event at every change: the S1 path
 * (set_s1) and the SGi path (set_sgi) cut; the eNB restarting (set_enb, needs --rlf: rrc.c); one UE's host
 * paused (set_ue_host, "ue": k: what its modem receives is dropped before its TUN, what it sends is lost). */
static json_t *fault_op(struct cell *c, const char *op, json_t *req)
{
    static const char *const what[] = {"the S1 path between the eNB and the core",
                                       "the SGi path between the core and the server", "the eNB (a restart)",
                                       "the UE's host (paused)"};
    int which = !strcmp(op, "set_s1") ? 0 : !strcmp(op, "set_sgi") ? 1 : !strcmp(op, "set_enb") ? 2 : 3, k = -1;
    char err[160];
    json_t *up = json_object_get(req, "up"), *rep;
    if (which == 3 && (rep = ue_from_request(c, req, &k, err, sizeof(err))))
        return rep;
    if (!json_is_boolean(up)) {
        snprintf(err, sizeof(err), "up: must be true or false (%s)", what[which]);
        return err_reply(err);
    }
    if (which == 2 && !c->p.rlf)
        return err_reply("set_enb: the eNB restart needs the RRC model (start the cell with --rlf)");
    int down = !json_is_true(up);
    int *down_now = which == 0 ? &c->s1_down : which == 1 ? &c->sgi_down : which == 2 ? &c->enb_down
                                                                                      : &c->ue[k].host_down;
    static const char *const events[][2] = {
        {"s1_up", "s1_down"}, {"sgi_up", "sgi_down"}, {"enb_up", "enb_down"}, {"ue_host_up", "ue_host_down"}};
    if (down != *down_now) {
        if (which == 2) { /* rrc.c: the contexts and queues go, the UEs fail their radio link and reconnect */
            (down ? rrc_enb_down : rrc_enb_up)(c, c->tti);
        } else {
            *down_now = down;
            uint64_t *cuts = which == 0 ? &c->s1_cuts : which == 1 ? &c->sgi_cuts : &c->host_cuts;
            *cuts += (uint64_t)down;
            cell_event(c, events[which][down], k, NULL);
        }
    }
    static const char *const keys[] = {"s1_up", "sgi_up", "enb_up", "host_up"};
    rep = json_pack("{s:b,s:b,s:I}", "ok", 1, keys[which], !*down_now, "tti", (json_int_t)c->tti);
    if (which == 3)
        json_object_set_new(rep, "ue", json_integer(k));
    return rep;
}

json_t *handle_request(struct cell *c, const char *text, size_t len)
{
    json_error_t jerr;
    json_t *req = json_loadb(text, len, 0, &jerr);
    if (!json_is_object(req)) {
        json_decref(req);
        return err_reply("request must be a JSON object with \"op\"");
    }
    const char *op = json_string_value(json_object_get(req, "op"));
    json_t *rep = NULL;
    char err[200];
    int k = 0;
    if (!op) {
        rep = err_reply("op: missing (allowed: set_attenuation, get_attenuation, pause, resume, stats, stalls, set_s1, set_sgi, set_enb, set_ue_host)");
    } else if (!strcmp(op, "set_attenuation")) {
        json_t *v = json_object_get(req, "attenuation_db");
        if (!(rep = ue_from_request(c, req, &k, err, sizeof(err)))) {
            if (!json_is_number(v) || json_number_value(v) < 0 || json_number_value(v) > 200)
                rep = err_reply("attenuation_db: must be a number in [0, 200]");
            else {
                struct ue *u = &c->ue[k];
                u->attenuation_db = json_number_value(v);
                /* the UE's RSRP follows at once (a calibration reads it right after setting) */
                u->rsrp_dbm = radio_rsrp_dbm(u->attenuation_db, u->fading_db);
                u->sinr_db = radio_sinr_db(u->rsrp_dbm);
                u->cqi_true = radio_cqi(u->sinr_db);
                if (c->p.rlf) { /* the fault timelines read it (a schedule's steps too) */
                    char extra[48];
                    snprintf(extra, sizeof(extra), "\"attenuation_db\": %.2f", u->attenuation_db);
                    cell_event(c, "attenuation", k, extra);
                }
                rep = json_pack("{s:b,s:i,s:f,s:I}", "ok", 1, "ue", k, "attenuation_db", c->ue[k].attenuation_db,
                                "tti", (json_int_t)c->tti);
            }
        }
    } else if (!strcmp(op, "get_attenuation")) {
        if (!(rep = ue_from_request(c, req, &k, err, sizeof(err))))
            rep = json_pack("{s:b,s:i,s:f,s:f,s:I}", "ok", 1, "ue", k, "attenuation_db", c->ue[k].attenuation_db,
                            "rsrp_dbm", c->ue[k].rsrp_dbm, "tti", (json_int_t)c->tti);
    } else if (!strcmp(op, "pause") || !strcmp(op, "resume")) {
        c->paused = !strcmp(op, "pause");
        rep = json_pack("{s:b,s:b,s:I}", "ok", 1, "paused", c->paused, "tti", (json_int_t)c->tti);
    } else if (!strcmp(op, "set_s1") || !strcmp(op, "set_sgi") || !strcmp(op, "set_enb") ||
               !strcmp(op, "set_ue_host")) {
        rep = fault_op(c, op, req);
    } else if (!strcmp(op, "stalls")) {
        json_t *since = json_object_get(req, "since_ns");
        if (since && (!json_is_integer(since) || json_integer_value(since) < 0))
            rep = err_reply("since_ns: must be a non-negative integer (CLOCK_MONOTONIC ns)");
        else
            rep = stalls_json(c, since ? (uint64_t)json_integer_value(since) : 0);
    } else if (!strcmp(op, "stats")) {
        if (c->tti_log)
            fflush(c->tti_log);
        if (c->clock_out)
            fflush(c->clock_out);
        rep = stats_json(c);
    } else {
        snprintf(err, sizeof(err), "op: %.40s unknown (allowed: set_attenuation, get_attenuation, pause, resume, stats, stalls, set_s1, set_sgi, set_enb, set_ue_host)",
                 op);
        rep = err_reply(err);
    }
    json_decref(req);
    return rep;
}

void serve_control(struct cell *c)
{
    if (!c->ctl)
        return;
    for (int i = 0; i < 16; i++) {
        zmq_msg_t msg;
        zmq_msg_init(&msg);
        if (zmq_msg_recv(&msg, c->ctl, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&msg);
            return;
        }
        int more = zmq_msg_more(&msg);
        json_t *rep = more ? err_reply("one frame per request") : handle_request(c, zmq_msg_data(&msg), zmq_msg_size(&msg));
        zmq_msg_close(&msg);
        while (more) { /* drain a multipart request so the REP socket stays in step */
            zmq_msg_init(&msg);
            zmq_msg_recv(&msg, c->ctl, 0);
            more = zmq_msg_more(&msg);
            zmq_msg_close(&msg);
        }
        char *s = json_dumps(rep, JSON_COMPACT | JSON_REAL_PRECISION(6));
        zmq_send(c->ctl, s ? s : "{\"ok\":false}", s ? strlen(s) : 12, 0);
        free(s);
        json_decref(rep);
    }
}

void setup_zmq(struct cell *c)
{
    if (!c->p.ctl_ep && !c->p.pub_ep)
        return;
    c->zctx = zmq_ctx_new();
    int linger = 0;
    if (c->p.ctl_ep) {
        c->ctl = zmq_socket(c->zctx, ZMQ_REP);
        zmq_setsockopt(c->ctl, ZMQ_LINGER, &linger, sizeof(linger));
        if (zmq_bind(c->ctl, c->p.ctl_ep) < 0)
            die("--ctl %s: %s", c->p.ctl_ep, zmq_strerror(errno));
        size_t sz = sizeof(c->ctl_fd);
        zmq_getsockopt(c->ctl, ZMQ_FD, &c->ctl_fd, &sz);
    }
    if (c->p.pub_ep) {
        c->pub = zmq_socket(c->zctx, ZMQ_PUB);
        zmq_setsockopt(c->pub, ZMQ_LINGER, &linger, sizeof(linger));
        if (zmq_bind(c->pub, c->p.pub_ep) < 0)
            die("--pub %s: %s", c->p.pub_ep, zmq_strerror(errno));
    }
}

void publish_telemetry(struct cell *c, uint64_t t)
{
    if (c->tti_log)
        fflush(c->tti_log);
    if (c->clock_out)
        fflush(c->clock_out);
    if (!c->pub)
        return;
    for (int k = 0; k < c->p.n_ues; k++) {
        struct ue *u = &c->ue[k];
        json_t *o = json_pack("{s:s,s:I,s:i,s:f,s:f,s:i,s:I,s:I,s:I,s:I,s:I,s:I,s:f}", "type", "cell.summary",
                              "tti", (json_int_t)t, "ue", k, "rsrp_dbm", u->rsrp_dbm, "sinr_db", u->sinr_db,
                              "cqi", u->cqi_used, "dl_bytes", (json_int_t)u->win_dl_bytes, "ul_bytes",
                              (json_int_t)u->win_ul_bytes, "queue_bytes", (json_int_t)u->dlq.bytes,
                              "harq_retx", (json_int_t)u->win_retx, "dl_tbs_bits", (json_int_t)u->win_dl_tbs_bits,
                              "dl_drop_bytes", (json_int_t)u->dl_drop_bytes, "attenuation_db", u->attenuation_db);
        json_object_set_new(o, "dl_discard_bytes", json_integer((json_int_t)u->dl_discard_bytes));
        /* when this TTI ran on the cell's own clock: on a recorded clock a TTI is not a millisecond */
        json_object_set_new(o, "wall_ns", json_integer((json_int_t)cell_wall_ns(c)));
        char *s = json_dumps(o, JSON_COMPACT);
        if (s) {
            zmq_send(c->pub, "cell", 4, ZMQ_SNDMORE | ZMQ_DONTWAIT);
            zmq_send(c->pub, s, strlen(s), ZMQ_DONTWAIT);
            free(s);
        }
        json_decref(o);
        u->win_dl_bytes = u->win_ul_bytes = u->win_retx = u->win_dl_tbs_bits = 0;
    }
}

void control_close(struct cell *c)
{
    if (c->ctl)
        zmq_close(c->ctl);
    if (c->pub)
        zmq_close(c->pub);
    if (c->zctx)
        zmq_ctx_term(c->zctx);
}
