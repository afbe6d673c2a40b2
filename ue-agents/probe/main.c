/* cellab-probe: the receiver of the cellab lab (virtual UE and Android). */
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "probe.h"

#ifdef HAVE_PCAP
#define PROBE_FEATURES "af_packet pcap exll dfcsd"
#else
#define PROBE_FEATURES "af_packet exll dfcsd (no pcap)"
#endif

static void usage(FILE *out)
{
    fputs("usage: cellab-probe <command> [options]\n"
          "  fetch     receive flows from cellab-send, time every packet, estimate, control the window\n"
          "  analyze   the same estimators on a pcap (--pcap) or a probe event log (--events)\n"
          "  selftest  the estimators on synthetic timing\n"
          "  --version\n",
          out);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "--version") || !strcmp(cmd, "version")) {
        printf("cellab-probe %s (%s)\n", PROBE_VERSION, PROBE_FEATURES);
        return 0;
    }
    if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(cmd, "fetch"))
        return cmd_fetch(argc - 1, argv + 1);
    if (!strcmp(cmd, "analyze"))
        return cmd_analyze(argc - 1, argv + 1);
    if (!strcmp(cmd, "selftest"))
        return cmd_selftest(argc - 1, argv + 1);
    fprintf(stderr, "cellab-probe: unknown command '%s' (allowed: fetch, analyze, selftest, --version)\n", cmd);
    return 2;
}
