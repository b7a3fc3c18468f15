/*
 * builtin.h: the commands.  Each cmd_*() parses its options, calls library
 * code and returns its exit status (git-autokernel(1), EXIT STATUS).
 */
#ifndef BUILTIN_H
#define BUILTIN_H

int cmd_init(int argc, char **argv);
int cmd_start(int argc, char **argv);
int cmd_verify(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_log(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_bisect(int argc, char **argv);
int cmd_profile(int argc, char **argv);
int cmd_ops(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_e2e(int argc, char **argv);
int cmd_demo(int argc, char **argv);
int cmd_hook(int argc, char **argv);
int cmd_judge_job(int argc, char **argv);

/* Runs the command argv[0] after the checks of its flags in the command
 * table (a repository, a work tree, an autokernel branch); its exit
 * status.  main() and commands that run another in-process call it. */
int run_builtin(int argc, char **argv);

/* Prints usage to stderr and returns 2 (or to stdout and 0 for -h). */
int usage_with(const char *text, int help);

#endif
