/* placeholder until the command lands; replaced by its real file */
#include "builtin.h"
#include "usage.h"

int cmd_report(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	return error("'report' is not built yet"), 2;
}
