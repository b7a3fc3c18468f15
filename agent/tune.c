/*
 * tune.c: the built-in tuner, the offline default agent.
 *
 * It searches the kernel's declared tunables (tunables.h) by coordinate
 * descent from the current best: each proposal changes one parameter to
 * its nearest untried value, rotating over the parameters; when every
 * neighbour of the best has been tried it restarts at a random untried
 * configuration.  What has been tried is read back from git (every kept
 * commit and every attempt of the branch), so no configuration is ever
 * measured twice, across runs and machines.  With several workers, a
 * configuration is claimed before it is proposed (ctx->claim): one that
 * another worker is judging counts as tried.
 */
#include <stdlib.h>
#include <string.h>
#include "agent/agent.h"
#include "lib/repo.h"
#include "agent/tunables.h"

struct tried {
	char **keys;
	size_t nr, alloc;
};

static int tried_has(const struct tried *t, const char *key)
{
	for (size_t i = 0; i < t->nr; i++)
		if (!strcmp(t->keys[i], key))
			return 1;
	return 0;
}

static void tried_add(struct tried *t, const char *key)
{
	if (tried_has(t, key))
		return;
	ALLOC_GROW(t->keys, t->nr + 1, t->alloc);
	t->keys[t->nr++] = xstrdup(key);
}

static void tried_clear(struct tried *t)
{
	for (size_t i = 0; i < t->nr; i++)
		free(t->keys[i]);
	free(t->keys);
}

/* The configurations of every experiment on the branch. */
static void load_tried(struct tried *tr, const struct agent_context *ctx)
{
	for (size_t i = 0; i < ctx->h->nr; i++) {
		struct strbuf text = STRBUF_INIT, key = STRBUF_INIT, err = STRBUF_INIT;
		char rev[GIT_OID_HEXSZ + 1];
		struct tunables t;

		git_oid_tostr(rev, sizeof(rev), &ctx->h->e[i].id);
		if (repo_read_file(&text, rev, ctx->kernel_rel) == 0 &&
		    tunables_parse(&t, text.buf, &err) == 0) {
			tunables_key(&key, &t);
			tried_add(tr, key.buf);
		}
		strbuf_release(&text);
		strbuf_release(&key);
		strbuf_release(&err);
	}
}

static int index_of(const struct tunable *p, long v)
{
	for (int i = 0; i < p->n_values; i++)
		if (p->values[i] == v)
			return i;
	return -1;
}

/* A configuration is a candidate if valid and never tried. */
static int usable(const struct tunables *t, const struct tried *tr)
{
	struct strbuf key = STRBUF_INIT, err = STRBUF_INIT;
	int ok;

	tunables_key(&key, t);
	ok = !tried_has(tr, key.buf) && tunables_valid(t, &err) == 1;
	strbuf_release(&key);
	strbuf_release(&err);
	return ok;
}

/* One parameter moved to its nearest untried value, parameters taken in
 * turn from start.  1 found (in out, hypothesis set), 0 none. */
static int coordinate_step(struct tunables *out, const struct tunables *best,
			   const struct tried *tr, int start,
			   struct strbuf *hyp)
{
	int n = best->n;

	for (int k = 0; k < n; k++) {
		int i = (start + k) % n;
		const struct tunable *p = &best->p[i];
		int at = index_of(p, p->value);

		/* nearest values first: at+1, at-1, at+2, ... */
		for (int d = 1; d <= p->n_values; d++) {
			for (int s = 0; s < 2; s++) {
				int j = at < 0 ? (s ? -1 : d - 1) :
					(s ? at - d : at + d);

				if (j < 0 || j >= p->n_values)
					continue;
				*out = *best;
				out->p[i].value = p->values[j];
				if (usable(out, tr)) {
					strbuf_addf(hyp, "tune: %s %ld -> %ld "
						    "(coordinate descent)",
						    p->name, p->value,
						    p->values[j]);
					return 1;
				}
			}
		}
	}
	return 0;
}

static unsigned long long mix(unsigned long long x)
{
	x += 0x9e3779b97f4a7c15ULL;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

static int random_restart(struct tunables *out, const struct tunables *best,
			  const struct tried *tr, unsigned long long seed,
			  struct strbuf *hyp)
{
	for (int attempt = 0; attempt < 4000; attempt++) {
		*out = *best;
		for (int i = 0; i < out->n; i++) {
			seed = mix(seed);
			out->p[i].value = out->p[i].values[seed %
						(unsigned)out->p[i].n_values];
		}
		if (usable(out, tr)) {
			strbuf_addstr(hyp, "tune: random restart at ");
			tunables_key(hyp, out);
			return 1;
		}
	}
	return 0;
}

/* The next configuration from best: a coordinate step, else a random
 * restart; 1 found, 0 none left. */
static int next_config(struct tunables *next, const struct tunables *best,
		       const struct tried *tr, const struct agent_context *ctx,
		       struct strbuf *hyp)
{
	strbuf_reset(hyp);
	return coordinate_step(next, best, tr, ctx->experiment % best->n,
			       hyp) ||
		random_restart(next, best, tr, mix(ctx->experiment * 7919ULL +
						   tr->nr), hyp);
}

/* A configuration no other worker has: claimed one, or 0 when none is
 * left. */
static int claim_next(struct tunables *next, const struct tunables *best,
		      struct tried *tr, const struct agent_context *ctx,
		      struct strbuf *hyp)
{
	struct strbuf key = STRBUF_INIT;
	int found;

	while ((found = next_config(next, best, tr, ctx, hyp)) && ctx->claim) {
		strbuf_reset(&key);
		tunables_key(&key, next);
		if (!ctx->claim(ctx->claim_data, key.buf))
			break;
		tried_add(tr, key.buf);         /* another worker's */
	}
	strbuf_release(&key);
	return found;
}

static int tune_propose(struct agent *a, const struct agent_context *ctx,
			struct proposal *pr)
{
	struct strbuf text = STRBUF_INIT, out = STRBUF_INIT, err = STRBUF_INIT;
	struct tried tr = { NULL, 0, 0 };
	struct tunables best, next;
	int ret = 0;

	(void)a;
	if (strbuf_read_file(&text, ctx->kernel_path) < 0) {
		strbuf_addf(&pr->failure, "cannot read '%s'", ctx->kernel_rel);
		ret = -1;
		goto cleanup;
	}
	if (tunables_parse(&best, text.buf, &err) < 0) {
		strbuf_addf(&pr->failure, "%s: %s", ctx->kernel_rel, err.buf);
		ret = -1;
		goto cleanup;
	}
	if (!best.n) {
		strbuf_addf(&pr->failure, "%s declares no tunables (see "
			    "include/autokernel.h): nothing for the tuner",
			    ctx->kernel_rel);
		ret = 2;
		goto cleanup;
	}
	load_tried(&tr, ctx);
	tunables_key(&out, &best);
	tried_add(&tr, out.buf);
	strbuf_reset(&out);
	if (!claim_next(&next, &best, &tr, ctx, &pr->hypothesis)) {
		strbuf_addf(&pr->failure, "every valid configuration of the "
			    "%d tunables has been tried (%zu in the history)",
			    best.n, tr.nr);
		ret = 2;
		goto cleanup;
	}
	tunables_apply(&out, text.buf, &next);
	if (write_file_atomic(ctx->kernel_path, out.buf, out.len) < 0) {
		strbuf_addf(&pr->failure, "cannot write '%s'", ctx->kernel_rel);
		ret = -1;
	}
cleanup:
	tried_clear(&tr);
	strbuf_release(&text);
	strbuf_release(&out);
	strbuf_release(&err);
	return ret;
}

static int tune_init(struct agent *a, int argc, char **argv)
{
	(void)a;
	(void)argv;
	if (argc > 0)
		return error("the tune agent takes no command");
	return 0;
}

struct agent *agent_tune_new(void)
{
	struct agent *a = xcalloc(1, sizeof(*a));

	a->name = "tune";
	a->init = tune_init;
	a->propose = tune_propose;
	return a;
}
