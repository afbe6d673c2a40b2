/* The subcommands main() dispatches to; each returns the process exit code
 * (0 ok, 1 failed or partial with a summary written, 2 usage error). */
#ifndef CELLAB_COMMANDS_H
#define CELLAB_COMMANDS_H

int cmd_fetch(int argc, char **argv);
int cmd_analyze(int argc, char **argv);
int cmd_selftest(int argc, char **argv);

#endif
