#include "builtin.h"
#include "usage.h"
#define TODO(n) int n(int argc, char **argv) { (void)argc; (void)argv; return error("not yet"), 2; }
TODO(cmd_run) TODO(cmd_report) TODO(cmd_bisect) TODO(cmd_profile) TODO(cmd_demo)
