/* cellab-zmq-broker's settings: the command line, and the commands its stdin takes while the stream runs (gains,
 * and the stack clock's recording: clock.c).
 *
 * A UE's gains are per direction: dl_gain_db scales its copy of srsenb's downlink, ul_gain_db its uplink in the sum
 * srsenb hears (a shield box's attenuator is passive: both directions lose the same dB). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "broker.h"

static void usage(const char *problem)
{
    fprintf(stderr, "cellab-zmq-broker: %s\nusage: cellab-zmq-broker --enb-tx EP --enb-rx EP "
                    "--ue rx=EP,tx=EP[,dl_gain_db=DB][,ul_gain_db=DB] [--ue ...] [--stats-s S] [--srate-hz HZ]"
                    "   (1..%d UEs)\n", problem, MAX_UES);
    exit(2);
}

/* a gain in dB from text: 1 if it is a whole finite number within the broker's bounds */
static int gain_db_of(const char *text, double *db)
{
    char *end;
    *db = strtod(text, &end);
    return *text != '\0' && *end == '\0' && isfinite(*db) && *db >= MIN_GAIN_DB && *db <= MAX_GAIN_DB;
}

/* "rx=EP,tx=EP,dl_gain_db=DB,ul_gain_db=DB": endpoints hold no commas, so the value runs to the next comma */
static void parse_ue(char *spec, struct ue *u)
{
    u->dl_amplitude = 1.0f;
    u->ul_amplitude = 1.0f;
    for (char *save = NULL, *kv = strtok_r(spec, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(kv, '=');
        if (!eq)
            usage("--ue: each field is key=value (keys rx, tx, dl_gain_db, ul_gain_db)");
        *eq = '\0';
        const char *val = eq + 1;
        double db;
        if (!strcmp(kv, "rx")) {
            u->rx_ep = val;
        } else if (!strcmp(kv, "tx")) {
            u->tx_ep = val;
        } else if (!strcmp(kv, "dl_gain_db")) {
            if (!gain_db_of(val, &db))
                usage("--ue dl_gain_db: a number of dB in -100..100");
            u->dl_amplitude = amplitude_of_db(db);
        } else if (!strcmp(kv, "ul_gain_db")) {
            if (!gain_db_of(val, &db))
                usage("--ue ul_gain_db: a number of dB in -100..100");
            u->ul_amplitude = amplitude_of_db(db);
        } else {
            usage("--ue: unknown key (allowed: rx, tx, dl_gain_db, ul_gain_db)");
        }
    }
    if (!u->rx_ep || !u->tx_ep)
        usage("--ue needs rx=EP and tx=EP");
}

void parse_args(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *opt = argv[i];
        if (i + 1 >= argc)
            usage("an option without its value");
        char *val = argv[++i];
        if (!strcmp(opt, "--enb-tx")) {
            B.enb_tx_ep = val;
        } else if (!strcmp(opt, "--enb-rx")) {
            B.enb_rx_ep = val;
        } else if (!strcmp(opt, "--ue")) {
            if (B.n_ues == MAX_UES)
                usage("too many --ue");
            char *spec = strdup(val); /* parsed in place: argv stays whole for ps */
            if (!spec)
                die("out of memory for", "--ue");
            parse_ue(spec, &B.ue[B.n_ues++]);
        } else if (!strcmp(opt, "--stats-s")) {
            char *end;
            B.stats_s = strtod(val, &end);
            if (*end != '\0' || !(B.stats_s > 0 && B.stats_s <= 3600))
                usage("--stats-s: seconds in (0, 3600]");
        } else if (!strcmp(opt, "--srate-hz")) {
            char *end;
            B.srate_hz = strtod(val, &end);
            if (*val == '\0' || *end != '\0' || !(B.srate_hz >= 1e5 && B.srate_hz <= 1e9))
                usage("--srate-hz: the cell's sample rate in Hz, 1e5..1e9");
        } else {
            usage("unknown option (allowed: --enb-tx, --enb-rx, --ue, --stats-s, --srate-hz)");
        }
    }
    if (!B.enb_tx_ep || !B.enb_rx_ep || B.n_ues == 0)
        usage("--enb-tx, --enb-rx and at least one --ue are required");
}

/* "clock_start RUN_ID DIR" / "clock_stop": 1 if `line` was one of them (answered) */
static int clock_command(const char *line)
{
    char reply[CLOCK_REPLY_MAX + CLOCK_DIR_MAX], id[CLOCK_RUN_ID_MAX + 2], dir[CLOCK_DIR_MAX + 2];
    int used = 0;
    if (!strncmp(line, "clock_stop", 10) && (line[10] == '\n' || line[10] == '\0')) {
        clock_stop(reply, sizeof reply);
    } else if (!strncmp(line, "clock_start", 11) && (line[11] == ' ' || line[11] == '\n' || line[11] == '\0')) {
        if (sscanf(line + 11, " %129s %1025s %n", id, dir, &used) != 2 || line[11 + used] != '\0')
            id[0] = '\0'; /* refused by clock_start, naming the form */
        clock_start(id, id[0] ? dir : "", reply, sizeof reply);
    } else {
        return 0;
    }
    say(reply);
    return 1;
}

/* "gain I DB" (UE I's downlink) and "ul_gain I DB" (its uplink) on stdin, each taken at that direction's next
 * block; "clock_start RUN_ID DIR" and "clock_stop" (clock.c); anything else is answered with an error and changes
 * nothing */
void *control(void *arg)
{
    (void)arg;
    char line[CLOCK_DIR_MAX + 256], reply[300], command[16], number[64];
    while (fgets(line, sizeof line, stdin)) {
        int ue, used = 0;
        if (clock_command(line))
            continue;
        double db;
        int uplink_gain = 0;
        if (sscanf(line, "%15s %d %63s %n", command, &ue, number, &used) != 3 || line[used] != '\0' ||
            (strcmp(command, "gain") && !(uplink_gain = !strcmp(command, "ul_gain"))) || ue < 0 ||
            ue >= B.n_ues || !gain_db_of(number, &db)) {
            snprintf(reply, sizeof reply, "{\"error\":\"expected 'gain UE DB' (downlink) or 'ul_gain UE DB' "
                     "(uplink) with UE 0..%d and DB in -100..100, 'clock_start RUN_ID DIR' or 'clock_stop'\"}\n", B.n_ues - 1);
            say(reply);
            continue;
        }
        if (uplink_gain)
            B.ue[ue].ul_amplitude = amplitude_of_db(db);
        else
            B.ue[ue].dl_amplitude = amplitude_of_db(db);
        snprintf(reply, sizeof reply, "{\"gain_ue\":%d,\"%s\":%.3f}\n", ue, uplink_gain ? "ul_gain_db" : "dl_gain_db",
                 db);
        say(reply);
    }
    return NULL; /* stdin closed: the gains stay as they are */
}
