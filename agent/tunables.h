/*
 * tunables.h: the tunable parameters a kernel declares, and edits of them.
 *
 * A tunable is one line of the kernel:
 *
 *	#define NAME VALUE  / * autokernel: tune V1,V2,... [if EXPR] * /
 *
 * (written without the spaces inside the comment markers), or in a Python
 * kernel (triton) a module-level constant:
 *
 *	NAME = VALUE  # autokernel: tune V1,V2,... [if EXPR]
 *
 * VALUE and
 * every Vi are integers, EXPR an optional C expression over the kernel's
 * tunables (integers; + - * / % ( ) < <= > >= == != && || !) that a
 * combination must satisfy.  Anything else on the line after the comment
 * is kept.
 *
 *	struct tunables t;
 *	tunables_parse(&t, text, &err);         // 0, or -1 with err
 *	t.p[i].value = 512;
 *	tunables_valid(&t, &err);               // every constraint holds
 *	tunables_apply(&out, text, &t);         // the kernel with new values
 */
#ifndef TUNABLES_H
#define TUNABLES_H

#include "lib/strbuf.h"

#define TUNE_MAX_PARAMS 16
#define TUNE_MAX_VALUES 32

struct tunable {
	char name[64];
	long value;                     /* as written in the kernel */
	long values[TUNE_MAX_VALUES];
	int n_values;
	char cond[256];                 /* "" when unconstrained */
	int line;                       /* 1-based */
};

struct tunables {
	struct tunable p[TUNE_MAX_PARAMS];
	int n;
};

int tunables_parse(struct tunables *t, const char *text, struct strbuf *err);
/* 1 when every constraint holds, 0 when one fails, -1 on a bad
 * expression (err says which). */
int tunables_valid(const struct tunables *t, struct strbuf *err);
void tunables_apply(struct strbuf *out, const char *text,
		    const struct tunables *t);
/* "BLOCK=256,ROWS=4": the configuration's key. */
void tunables_key(struct strbuf *out, const struct tunables *t);

/* Evaluates a constraint expression over t; -1 with err on bad syntax
 * or an unknown name. */
int tune_eval(const char *expr, const struct tunables *t, long *out,
	      struct strbuf *err);

#endif
