/*
 * torchref.c: PyTorch's own op timed beside a kernel (judge/torchref.h).
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "judge/devlock.h"
#include "judge/torchref.h"
#include "lib/paths.h"
#include "lib/repo.h"
#include "ops/dtype.h"
#include "verify/runners.h"

enum { EAGER_SLOT, COMPILE_SLOT };

/* torch.compile's first call at a shape: Inductor writes and Triton
 * compiles its kernels, minutes for a big graph on a cold cache. */
#define COMPILE_WARM_MS (10 * 60 * 1000)

static void module_path(struct strbuf *path, const char *sub, const char *op)
{
	strbuf_addf(path, "%s/python/torch_ref/%s%s.py", ak_datadir(), sub,
		    op);
}

int torchref_spawn(struct torchref *t, const char *backend)
{
	char name[16];

	torch_runner_name(name, sizeof(name), backend);
	if (runner_present(name, &t->why) < 0 ||
	    runner_spawn(&t->r, name, config_timeout_ms(), &t->why) < 0) {
		runner_stop(&t->r);
		return -1;
	}
	t->spawned = 1;
	return 0;
}

/* The torch.compile module, where the runner says torch.compile works. */
static void load_compiled(struct torchref *t, const struct problem *p)
{
	struct strbuf path = STRBUF_INIT;
	const char *no = json_string_value(json_object_get(t->r.hello,
							    "no_compile"));

	if (!json_is_true(json_object_get(t->r.hello, "compile"))) {
		strbuf_addstr(&t->why_compile, no ? no : "the runner has none");
		return;
	}
	module_path(&path, "compiled/", p->op->name);
	if (runner_load(&t->r, COMPILE_SLOT, path.buf, &t->why_compile) == 0)
		t->compile = 1;
	strbuf_release(&path);
}

int torchref_ready(struct torchref *t, const struct problem *p)
{
	struct strbuf path = STRBUF_INIT;
	const char *v;
	int ret = -1;

	if (!t->spawned)
		return -1;
	if (runner_hello(&t->r, &t->why))
		goto cleanup;
	v = json_string_value(json_object_get(t->r.hello, "torch"));
	snprintf(t->version, sizeof(t->version), "%s", v ? v : "?");
	module_path(&path, "", p->op->name);
	if (access(path.buf, R_OK)) {
		strbuf_addf(&t->why, "no PyTorch reference for %s at '%s'",
			    p->op->name, path.buf);
		goto cleanup;
	}
	if (runner_load(&t->r, EAGER_SLOT, path.buf, &t->why) < 0)
		goto cleanup;
	t->ok = 1;
	ret = 0;
	load_compiled(t, p);
cleanup:
	if (ret < 0) {
		runner_stop(&t->r);
		t->spawned = 0;
	}
	strbuf_release(&path);
	return ret;
}

const char *torchref_device(const struct torchref *t)
{
	const char *name = json_string_value(json_object_get(t->r.hello,
							      "name"));

	return name ? name : "unknown device";
}

/* The benchmark of slots[0..n-1] at s, with the device's lock. */
static int timed(struct torchref *t, struct judge *j, const struct problem *p,
		 const struct shape *s, enum ak_dtype dt, int n, json_t **res,
		 struct strbuf *why)
{
	static const int slots[] = { EAGER_SLOT, COMPILE_SLOT };
	struct devlock l = DEVLOCK_INIT;
	json_t *ceilings = judge_ceilings(j, 0);
	int rc;

	devlock_take(&l, j, DEVLOCK_EXCLUSIVE);
	j->device_wait += l.waited;
	rc = bench_fresh(&t->r, p, s, dt, slots, n, ceilings, 1.0, NULL, res,
			 why);
	devlock_release(&l);
	return rc;
}

/* A warm-up's error names its case ("at 16x256 f16: ..."): the caller
 * names the shape itself. */
static void drop_case(struct strbuf *why, const struct shape *s,
		      enum ak_dtype dt)
{
	struct strbuf head = STRBUF_INIT;
	char shape[128];

	shape_format(s, shape, sizeof(shape));
	strbuf_addf(&head, "at %s %s: ", shape, dtype_name(dt));
	if (starts_with(why->buf, head.buf)) {
		memmove(why->buf, why->buf + head.len, why->len - head.len + 1);
		strbuf_setlen(why, why->len - head.len);
	}
	strbuf_release(&head);
}

/* One call of a slot at s on zero inputs (torch.compile's graph for s),
 * with the device shared as the stages share it. */
static int warm(struct torchref *t, struct judge *j, int slot,
		const struct problem *p, const struct shape *s,
		enum ak_dtype dt, struct strbuf *why)
{
	struct devlock l = DEVLOCK_INIT;
	int ms = slot == COMPILE_SLOT ? COMPILE_WARM_MS : 2 * t->r.timeout_ms;
	int rc;

	devlock_take(&l, j, DEVLOCK_SHARED);
	j->device_wait += l.waited;
	rc = runner_warm_shape(&t->r, slot, p, s, dt, ms, why);
	devlock_release(&l);
	if (rc)
		drop_case(why, s, dt);
	return rc;
}

static json_t *absent(struct strbuf *why)
{
	strbuf_trim(why);
	return json_pack("{s:s}", "absent", why->len ? why->buf :
			 "PyTorch could not be timed");
}

/* The figures of a finished benchmark of n slots. */
static json_t *figures(struct torchref *t, json_t *res, int n,
		       struct strbuf *why_compile)
{
	json_t *ks = json_object_get(res, "kernels");
	json_t *fig = json_pack("{s:s,s:O,s:O*}", "torch", t->version,
				"eager", json_array_get(ks, 0), "checked",
				json_object_get(res, "checked"));

	if (n > 1)
		json_object_set(fig, "compile", json_array_get(ks, 1));
	else if (why_compile->len || t->why_compile.len)
		json_object_set_new(fig, "no_compile", json_string(
			why_compile->len ? why_compile->buf :
			t->why_compile.buf));
	return fig;
}

json_t *torchref_bench(struct torchref *t, struct judge *j,
		       const struct problem *p, const struct shape *s,
		       enum ak_dtype dt)
{
	struct strbuf why = STRBUF_INIT, cwhy = STRBUF_INIT;
	json_t *res = NULL, *fig;
	int n = 1, rc;

	if (warm(t, j, EAGER_SLOT, p, s, dt, &why) < 0) {
		fig = absent(&why);
		goto cleanup;
	}
	if (t->compile && !warm(t, j, COMPILE_SLOT, p, s, dt, &cwhy))
		n = 2;
	rc = timed(t, j, p, s, dt, n, &res, &why);
	if (rc && n > 1) {
		/* eager and compile interleaved failed: eager alone says
		 * whose failure it was */
		strbuf_addbuf(&cwhy, &why);
		strbuf_reset(&why);
		json_decref(res);
		res = NULL;
		n = 1;
		if ((rc = timed(t, j, p, s, dt, n, &res, &why)))
			strbuf_reset(&cwhy);
	}
	fig = rc ? absent(&why) : figures(t, res, n, &cwhy);
cleanup:
	json_decref(res);
	strbuf_release(&why);
	strbuf_release(&cwhy);
	return fig;
}

/* PyTorch's key ("eager", "compile") against the kernel's run. */
static void relate(json_t *fig, const char *key, const char *vs,
		   double kernel_us, double floor_us)
{
	json_t *st = json_object_get(fig, key);
	double us = json_number_value(json_object_get(st, "median_us"));

	if (us <= 0)
		return;
	if (kernel_us > 0)
		json_object_set_new(fig, vs, json_real(us / kernel_us));
	if (floor_us > 0)
		json_object_set_new(st, "roofline", json_real(floor_us / us));
}

void torchref_relate(json_t *fig, double kernel_us, double floor_us)
{
	relate(fig, "eager", "vs_eager", kernel_us, floor_us);
	relate(fig, "compile", "vs_compile", kernel_us, floor_us);
}

void torchref_release(struct torchref *t)
{
	runner_stop(&t->r);
	t->spawned = t->ok = t->compile = 0;
	strbuf_release(&t->why);
	strbuf_release(&t->why_compile);
}
