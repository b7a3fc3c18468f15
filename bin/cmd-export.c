/*
 * cmd-export.c: `export [<rev>...] [-o DIR]`: the kept kernels as a
 * Python package (export.h, doc/pytorch.md).
 */
#include <getopt.h>
#include <stdio.h>
#include "bin/builtin.h"
#include "export/export.h"

static const char usage_export[] =
	"usage: git autokernel export [<rev>...] [-o DIR]\n"
	"\n"
	"Writes DIR (default: autokernel_ops), a Python package that\n"
	"registers the newest verified kept kernel of each branch named\n"
	"(default: every autokernel/* branch) as torch.ops.autokernel.<name>,\n"
	"with fallbacks to PyTorch and patch(model).  Import it with DIR's\n"
	"parent on sys.path, or 'pip install DIR'.  A <rev> is a branch, an\n"
	"experiment's name or a commit.\n";

int cmd_export(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "output", required_argument, NULL, 'o' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct export ex = EXPORT_INIT;
	const char *dir = "autokernel_ops";
	int opt, rc;

	while ((opt = getopt_long(argc, argv, "ho:", opts, NULL)) != -1) {
		if (opt != 'o')
			return usage_with(usage_export, opt == 'h');
		dir = optarg;
	}
	rc = export_package(&ex, dir, (const char *const *)argv + optind,
			    argc - optind);
	for (size_t i = 0; !rc && i < ex.nr; i++)
		printf("exported %s at %.7s as torch.ops.autokernel.%s\n",
		       ex.k[i].label, git_oid_tostr_s(&ex.k[i].commit),
		       ex.k[i].torch_name);
	if (!rc)
		printf("wrote %s/: import it with its parent directory on "
		       "sys.path, or 'pip install %s'\n", dir, dir);
	export_release(&ex);
	return rc == AK_EUSAGE ? EXIT_USAGE : rc ? EXIT_ENV : EXIT_OK;
}
