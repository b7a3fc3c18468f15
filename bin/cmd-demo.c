/*
 * cmd-demo.c: `demo`: the whole loop in a scratch repository, start to
 * log, on the best backend present.
 */
#include <getopt.h>
#include <stdarg.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "bin/builtin.h"
#include "lib/paths.h"
#include "lib/repo.h"
#include "lib/run.h"
#include "judge/setup.h"

static const char usage_demo[] =
	"usage: git autokernel demo [--dir DIR] [--max-experiments N]\n"
	"                           [--backend B] [--op OP]\n"
	"\n"
	"Makes a scratch repository (a new directory under $TMPDIR, or DIR),\n"
	"starts softmax on the best backend present (CUDA when a device\n"
	"answers, else the host), runs N tune experiments (20) and prints the\n"
	"log and where the repository is.\n";

/* Runs this binary with args in dir, output to the terminal. */
static int self(const char *dir, ...)
{
	struct child c = CHILD_INIT;
	const char *arg;
	va_list ap;
	int rc;

	strvec_push(&c.args, ak_exe());
	va_start(ap, dir);
	while ((arg = va_arg(ap, const char *)))
		strvec_push(&c.args, arg);
	va_end(ap);
	c.dir = dir;
	c.same_group = 1;       /* Ctrl-C reaches the loop as it should */
	rc = run_child(&c);
	child_release(&c);
	return rc;
}

static int git_in(const char *dir, ...)
{
	struct child c = CHILD_INIT;
	const char *arg;
	va_list ap;
	int rc;

	strvec_push(&c.args, "git");
	va_start(ap, dir);
	while ((arg = va_arg(ap, const char *)))
		strvec_push(&c.args, arg);
	va_end(ap);
	c.dir = dir;
	c.capture = 1;
	c.merge_err = 1;
	c.no_stdin = 1;
	c.timeout_ms = 60000;
	rc = run_child(&c);
	if (rc)
		fprintf(stderr, "%s", c.out.buf);
	child_release(&c);
	return rc;
}

static int make_repo(const char *dir)
{
	struct strbuf readme = STRBUF_INIT;
	int rc;

	strbuf_addf(&readme, "%s/README.md", dir);
	write_file_atomic(readme.buf, "# git-autokernel demo\n", 22);
	rc = git_in(dir, "init", "-q", NULL) ||
		git_in(dir, "config", "user.name", "git-autokernel demo", NULL) ||
		git_in(dir, "config", "user.email", "demo@localhost", NULL) ||
		git_in(dir, "add", "README.md", NULL) ||
		git_in(dir, "commit", "-q", "-m", "a repository for kernels", NULL);
	strbuf_release(&readme);
	return rc ? error("unable to make the demo repository in '%s'", dir) : 0;
}

int cmd_demo(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "dir", required_argument, NULL, 'd' },
		{ "max-experiments", required_argument, NULL, 'n' },
		{ "backend", required_argument, NULL, 'b' },
		{ "op", required_argument, NULL, 'o' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *dir_opt = NULL, *max = "20", *op = "softmax";
	const char *backend = NULL, *tmp = getenv("TMPDIR");
	char dir[PATH_MAX];
	int opt, rc;

	while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (opt) {
		case 'd': dir_opt = optarg; break;
		case 'n': max = optarg; break;
		case 'b': backend = optarg; break;
		case 'o': op = optarg; break;
		default: return usage_with(usage_demo, opt == 'h');
		}
	}
	if (optind < argc)
		return usage_with(usage_demo, 0);
	if (dir_opt) {
		if (mkdir_p(dir_opt) < 0 || !realpath(dir_opt, dir))
			return 3;
	} else {
		snprintf(dir, sizeof(dir), "%s/git-autokernel-demo-XXXXXX",
			 tmp && *tmp ? tmp : "/tmp");
		if (!mkdtemp(dir)) {
			error_errno("unable to create '%s'", dir);
			return EXIT_ENV;
		}
	}
	if (!backend)
		backend = best_backend();
	printf("git autokernel demo: %s on the %s backend, in %s\n\n", op,
	       backend, dir);
	if (make_repo(dir) < 0)
		return 3;
	if ((rc = self(dir, "init", "--no-measure", NULL)) ||
	    (rc = self(dir, "start", op, "--backend", backend, NULL)))
		return rc;
	rc = self(dir, "run", "--agent", "tune", "--max-experiments", max, NULL);
	printf("\nthe demo repository is %s:\n"
	       "  cd %s && git log --notes=autokernel\n"
	       "  git autokernel log --attempts; git autokernel report\n",
	       dir, dir);
	return rc;
}
