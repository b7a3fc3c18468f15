/*
 * unit-tunables.c: the tunable lines of a kernel (agent/tunables.h) in
 * both forms, C's #define and a Python module's constant, in TAP: parsed,
 * constrained, rewritten with only the number changed.
 */
#include <string.h>
#include "tests/tap.h"
#include "agent/tunables.h"

static const char c_kernel[] =
	"#include \"autokernel.h\"\n"
	"#define BLOCK 256  /* autokernel: tune 128,256,512 */\n"
	"#define ROWS 4 /* autokernel: tune 1,2,4,8 if BLOCK*ROWS <= 1024 */\n"
	"int ak_kernel(const struct ak_args *a) { return 0; }\n";

static const char py_kernel[] =
	"import triton\n"
	"BLOCK = 1024  # autokernel: tune 256,512,1024,2048\n"
	"WARPS=4 # autokernel: tune 2,4,8 if WARPS * 32 <= BLOCK\n"
	"    INDENTED = 3  # autokernel: tune 1,2\n"
	"# OFF = 1  # autokernel: tune 1,2\n"
	"SAME == 1  # autokernel: tune 1,2\n"
	"def ak_kernel(a):\n"
	"    return 0\n";

int main(void)
{
	struct strbuf err = STRBUF_INIT, out = STRBUF_INIT;
	struct tunables t;
	int r;

	r = tunables_parse(&t, c_kernel, &err);
	ok(r == 0 && t.n == 2 && !strcmp(t.p[0].name, "BLOCK") &&
	   t.p[0].value == 256 && t.p[0].n_values == 3 &&
	   t.p[1].value == 4 && !strcmp(t.p[1].cond, " BLOCK*ROWS <= 1024 "),
	   "C: two #define tunables, values and the constraint (%s)", err.buf);
	r = tunables_parse(&t, py_kernel, &err);
	ok(r == 0 && t.n == 2 && !strcmp(t.p[0].name, "BLOCK") &&
	   t.p[0].value == 1024 && t.p[0].n_values == 4 &&
	   !strcmp(t.p[1].name, "WARPS") && t.p[1].line == 3,
	   "Python: module-level constants only (%s)", err.buf);
	t.p[0].value = 256;
	ok(tunables_valid(&t, &err) == 1, "Python: WARPS=4 fits BLOCK=256");
	t.p[0].value = 64;
	ok(tunables_valid(&t, &err) == 0, "Python: not BLOCK=64");
	t.p[1].value = 8;
	t.p[0].value = 2048;
	tunables_apply(&out, py_kernel, &t);
	ok(strstr(out.buf, "\nBLOCK = 2048  # autokernel: tune 256,") &&
	   strstr(out.buf, "\nWARPS=8 # autokernel") &&
	   strlen(out.buf) == strlen(py_kernel),
	   "Python: rewritten in place");
	strbuf_reset(&err);
	ok(tunables_parse(&t, "X = abc  # autokernel: tune 1,2\n", &err) < 0 &&
	   strstr(err.buf, "NAME = VALUE"), "Python: a malformed one (%s)",
	   err.buf);
	strbuf_release(&err);
	strbuf_release(&out);
	return tap_done();
}
