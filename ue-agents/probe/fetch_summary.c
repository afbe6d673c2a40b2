/* cellab-probe fetch: the JSON summary: status, capture, uplink probes, errors, what is missing, each
 * request's outcome, then the pipeline's measurements. */
#include <math.h>
#include <stdio.h>

#include "fetch.h"
#include "jsonw.h"
#include "probe.h"

void fetch_write_summary(struct fetch_ctx *c, FILE *out)
{
    struct jsonw w;
    jw_init(&w, out);
    int failed = 0, incomplete = 0;
    for (int i = 0; i < c->n_flows; i++) {
        failed += c->flows[i].state == F_FAILED;
        incomplete += c->flows[i].state != F_DONE || !c->flows[i].complete;
    }
    const char *status = failed == c->n_flows ? "error" : (incomplete || c->n_missing || c->n_errors ? "partial" : "ok");
    jw_obj_open(&w, NULL);
    jw_str(&w, "tool", "cellab-probe");
    jw_str(&w, "version", PROBE_VERSION);
    jw_str(&w, "command", "fetch");
    jw_str(&w, "status", status);
    char server[300];
    snprintf(server, sizeof(server), "%s:%d", c->o.server, c->o.port);
    jw_str(&w, "server", server);
    jw_str(&w, "control", control_name(c->o.control));
    jw_str(&w, "timestamps", c->packet_mode ? "packet-ns" : "socket-coarse");
    jw_num(&w, "start_ns", (double)c->t_start_ns);
    jw_bool(&w, "timed_out", c->timed_out);
    jw_bool(&w, "interrupted", c->interrupted);
    jw_obj_open(&w, "capture");
    jw_str(&w, "kind", c->packet_mode ? "af_packet" : "tcp-socket");
    jw_str(&w, "interface", c->o.iface ? c->o.iface : "any");
    jw_int(&w, "packets", (long long)c->cap.packets);
    jw_int(&w, "kernel_drops", (long long)c->cap.kernel_drops);
    jw_obj_close(&w);
    jw_obj_open(&w, "uplink_probes");
    jw_int(&w, "requested", c->o.sr_probes);
    jw_int(&w, "budget", c->o.sr_probes_max);
    jw_int(&w, "sent", c->probes.sent);
    jw_int(&w, "received", c->probes.received);
    jw_str(&w, "socket", c->probes.socket_kind);
    jw_num(&w, "elapsed_ms", c->probes_elapsed_ms);
    jw_arr_open(&w, "rtt_ms");
    for (int i = 0; i < c->probes.received; i++)
        jw_num(&w, NULL, c->probes.rtt_us[i] / 1e3);
    jw_arr_close(&w);
    jw_arr_open(&w, "reply_wall_ns"); /* CLOCK_REALTIME of each reply, rtt_ms's order: for the stack clock */
    for (int i = 0; i < c->probes.received; i++)
        jw_int(&w, NULL, (long long)c->probes.reply_wall_ns[i]);
    jw_arr_close(&w);
    jw_str(&w, "error", c->probe_error[0] ? c->probe_error : NULL);
    jw_obj_close(&w);
    jw_str_rows(&w, "errors", c->errors[0], sizeof c->errors[0], c->n_errors);
    jw_arr_open(&w, "missing");
    for (int i = 0; i < c->n_missing; i++)
        jw_str(&w, NULL, c->missing[i]);
    for (int i = 0; i < c->n_flows; i++) {
        const struct fetch_flow *f = &c->flows[i];
        char msg[300];
        if (f->state == F_FAILED)
            snprintf(msg, sizeof(msg), "flow %d: %s (%llu bytes received)", i,
                     f->bytes_read ? "measurements up to the failure only" : "no measurements",
                     (unsigned long long)f->bytes_read);
        else if (f->state != F_DONE)
            snprintf(msg, sizeof(msg), "flow %d: unfinished at the timeout, measurements up to it only", i);
        else if (!f->complete)
            snprintf(msg, sizeof(msg), "flow %d: %llu of %llu bytes", i, (unsigned long long)f->bytes_read,
                     (unsigned long long)f->spec.amount);
        else
            continue;
        jw_str(&w, NULL, msg);
    }
    jw_arr_close(&w);
    jw_arr_open(&w, "requests");
    for (int i = 0; i < c->n_flows; i++) {
        const struct fetch_flow *f = &c->flows[i];
        jw_obj_open(&w, NULL);
        jw_int(&w, "index", i);
        jw_str(&w, "mode", f->spec.mode == FLOW_MODE_BYTES ? "bytes" : "milliseconds");
        jw_int(&w, "amount", (long long)f->spec.amount);
        jw_int(&w, "start_ms", (long long)f->spec.start_ms);
        jw_str(&w, "cc", f->spec.cc);
        jw_int(&w, "tag", (long long)f->spec.tag);
        const char *st = f->state == F_DONE ? "done" : f->state == F_FAILED ? "failed" : "unfinished";
        jw_str(&w, "state", st);
        jw_bool(&w, "complete", f->state == F_DONE && f->complete);
        jw_int(&w, "bytes_read", (long long)f->bytes_read);
        jw_int(&w, "sender_status", f->status);
        jw_int(&w, "sender_flow_id", (long long)f->flow_id);
        jw_int(&w, "rcvbuf_bytes", f->rcvbuf_bytes);
        jw_num(&w, "fct_ms", f->state == F_DONE ? (double)(f->t_done_ns - f->t_connect_ns) / 1e6 : NAN);
        jw_int(&w, "pipeline_flow", f->pipe_idx);
        if (f->error[0])
            jw_str(&w, "error", f->error);
        jw_obj_close(&w);
    }
    jw_arr_close(&w);
    pipe_write_summary(&c->pl, &w);
    jw_obj_close(&w);
}
