/*
 * cmd-hook.c: `hook`, what the installed hooks call (judge/hooks.h).
 */
#include <string.h>
#include "bin/builtin.h"
#include "judge/hooks.h"
#include "lib/trace.h"

static const char usage_hook[] =
	"usage: git autokernel hook (pre-commit | commit-msg <file> | post-commit)\n";

static int traced_exit(const char *hook, int rc)
{
	trace("hook", "%s ends: %d", hook, rc);
	return rc;
}

int cmd_hook(int argc, char **argv)
{
	if (argc < 2)
		return usage_with(usage_hook, 0);
	if (!strcmp(argv[1], "-h"))
		return usage_with(usage_hook, 1);
	trace("hook", "%s starts", argv[1]);
	if (!strcmp(argv[1], "pre-commit"))
		return traced_exit("pre-commit", hook_pre_commit());
	if (!strcmp(argv[1], "commit-msg") && argc == 3)
		return traced_exit("commit-msg", hook_commit_msg(argv[2]));
	if (!strcmp(argv[1], "post-commit"))
		return traced_exit("post-commit", hook_post_commit());
	return usage_with(usage_hook, 0);
}
