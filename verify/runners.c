#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "lib/paths.h"
#include "lib/python.h"
#include "ops/dtype.h"
#include "verify/runners.h"

static void triton_script(struct strbuf *path)
{
	strbuf_addf(path, "%s/python/ak_runner_triton.py", ak_datadir());
}

/* $NAME, else <cachedir>/<sub>, in buf. */
static const char *cache_dir(char *buf, size_t n, const char *name,
			     const char *sub)
{
	const char *env = getenv(name);

	if (env && *env)
		return env;
	snprintf(buf, n, "%s/%s", ak_cachedir(), sub);
	return buf;
}

const char *triton_cache_dir(void)
{
	static char dir[4096];

	return cache_dir(dir, sizeof(dir), "TRITON_CACHE_DIR", "triton");
}

const char *inductor_cache_dir(void)
{
	static char dir[4096];

	return cache_dir(dir, sizeof(dir), "TORCHINDUCTOR_CACHE_DIR",
			 "torchinductor");
}

int runner_is_python(const char *backend)
{
	return !strcmp(backend, "triton") || starts_with(backend, "torch-");
}

int runner_on_gpu(const char *backend)
{
	return strcmp(backend, "host") && strcmp(backend, "torch-host");
}

void torch_runner_name(char *out, size_t n, const char *backend)
{
	snprintf(out, n, "torch-%s", backend);
}

/*
 * The Python runner's device, $AUTOKERNEL_TRITON_DEVICE, set in its
 * environment (the cell passes only what it is given): PyTorch's runner
 * beside a host kernel is on the CPU (the fake device), beside a CUDA or
 * HIP kernel on the GPU; the triton runners use whatever the user set.
 */
static void python_device(struct strvec *env, const char *backend)
{
	const char *dev = getenv("AUTOKERNEL_TRITON_DEVICE");

	if (!strcmp(backend, "torch-host"))
		dev = "fake";
	else if (strcmp(backend, "torch-triton") && strcmp(backend, "triton"))
		dev = "cuda";       /* torch-cuda, torch-hip */
	if (dev && *dev)
		strvec_pushf(env, "AUTOKERNEL_TRITON_DEVICE=%s", dev);
}

int runner_command(struct strvec *args, struct strvec *env,
		   const char *backend, struct strbuf *why)
{
	struct strbuf script = STRBUF_INIT;
	const char *py, *site;

	if (!runner_is_python(backend)) {
		strvec_pushf(args, "%s/ak-runner-%s", ak_libexecdir(), backend);
		return 0;
	}
	if (!(py = python_torch(why)))
		return -1;
	triton_script(&script);
	strvec_pushl(args, py, script.buf, NULL);
	strvec_pushf(env, "TRITON_CACHE_DIR=%s", triton_cache_dir());
	/* what the cell's filtered environment would drop */
	python_device(env, backend);
	if ((site = python_torch_site()))
		strvec_pushf(env, "PYTHONPATH=%s%s%s", site,
			     getenv("PYTHONPATH") ? ":" : "",
			     getenv("PYTHONPATH") ? getenv("PYTHONPATH") : "");
	if (strcmp(backend, "triton")) {
		const char *nc = getenv("AUTOKERNEL_TORCH_COMPILE");

		strvec_push(env, "AK_RUNNER_REFERENCE=1");
		if (nc)
			strvec_pushf(env, "AUTOKERNEL_TORCH_COMPILE=%s", nc);
		strvec_pushf(env, "TORCHINDUCTOR_CACHE_DIR=%s",
			     inductor_cache_dir());
	}
	strbuf_release(&script);
	return 0;
}

int runner_present(const char *backend, struct strbuf *why)
{
	struct strbuf path = STRBUF_INIT, err = STRBUF_INIT;
	int ret = 0;

	if (runner_is_python(backend)) {
		triton_script(&path);
		if (access(path.buf, R_OK)) {
			if (why)
				strbuf_addf(why, "no %s runner at '%s'",
					    backend, path.buf);
			ret = -1;
		} else if (!python_torch(&err)) {
			if (why && !strcmp(backend, "triton"))
				strbuf_addf(why, "no triton runner: %s", err.buf);
			else if (why)
				strbuf_addbuf(why, &err);
			ret = -1;
		}
	} else {
		strbuf_addf(&path, "%s/ak-runner-%s", ak_libexecdir(), backend);
		if (access(path.buf, X_OK)) {
			if (why)
				strbuf_addf(why, "no %s runner at '%s' (was "
					    "git-autokernel built with the %s "
					    "toolchain?)", backend, path.buf,
					    !strcmp(backend, "cuda") ? "CUDA" :
					    backend);
			ret = -1;
		}
	}
	strbuf_release(&path);
	strbuf_release(&err);
	return ret;
}

int runner_worth_asking(const char *backend)
{
	const char *fake = getenv("AUTOKERNEL_TRITON_DEVICE");

	if (strcmp(backend, "triton"))
		return 1;
	return (fake && *fake) || !access("/proc/driver/nvidia/version", R_OK);
}

/* {"tensors": [...], "scalar": [...], "label": "4x32 f16"} */
static json_t *warm_case(const struct problem *p, const struct shape *s,
			 enum ak_dtype dt)
{
	struct ak_tensor in[AK_OP_MAX_IN], out[AK_OP_MAX_OUT];
	json_t *ts = json_array(), *sc = json_array();
	double scalar[4];
	char label[160];
	size_t n;

	memset(in, 0, sizeof(in));
	memset(out, 0, sizeof(out));
	p->op->tensors(s, dt, in, out);
	for (int i = 0; i < p->op->n_in + p->op->n_out; i++) {
		const struct ak_tensor *t = i < p->op->n_in ? &in[i] :
			&out[i - p->op->n_in];
		json_t *shape = json_array();

		for (int d = 0; d < t->ndim; d++)
			json_array_append_new(shape, json_integer(t->shape[d]));
		json_array_append_new(ts, json_pack("{s:i,s:o,s:b}", "dtype",
			(int)t->dtype, "shape", shape, "out", i >= p->op->n_in));
	}
	memcpy(scalar, p->scalar, sizeof(scalar));
	p->op->scalars(s, scalar);
	for (int i = 0; i < 4; i++)
		json_array_append_new(sc, json_real(scalar[i]));
	shape_format(s, label, sizeof(label));
	n = strlen(label);
	snprintf(label + n, sizeof(label) - n, " %s", dtype_name(dt));
	return json_pack("{s:o,s:o,s:s}", "tensors", ts, "scalar", sc,
			 "label", label);
}

/* Adds the case unless one of the same label is there. */
static void add_case(json_t *cases, const struct problem *p,
		     const struct shape *s, enum ak_dtype dt)
{
	json_t *c = warm_case(p, s, dt), *o;
	const char *label = json_string_value(json_object_get(c, "label"));
	size_t i;

	json_array_foreach(cases, i, o)
		if (!strcmp(label, json_string_value(json_object_get(o,
								"label")))) {
			json_decref(c);
			return;
		}
	json_array_append_new(cases, c);
}

/* One warm request of one case; 0, or -1 with why. */
static int warm_one(struct runner *r, int slot, json_t *c, int timeout_ms,
		    struct strbuf *why)
{
	json_t *req = json_pack("{s:s,s:i,s:[O]}", "req", "warm", "slot", slot,
				"cases", c), *res;
	const char *err;
	int ret = 0;

	res = runner_request(r, req, timeout_ms, why);
	json_decref(req);
	if (!res)
		return -1;
	if (!json_is_true(json_object_get(res, "ok"))) {
		err = json_string_value(json_object_get(res, "error"));
		strbuf_addstr(why, err ? err : "the warm-up failed");
		ret = -1;
	}
	json_decref(res);
	return ret;
}

int runner_warm_shape(struct runner *r, int slot, const struct problem *p,
		      const struct shape *s, enum ak_dtype dt, int timeout_ms,
		      struct strbuf *why)
{
	json_t *c = warm_case(p, s, dt);
	int ret = warm_one(r, slot, c, timeout_ms, why);

	json_decref(c);
	return ret;
}

int runner_warm(struct runner *r, int slot, const struct problem *p,
		struct strbuf *why)
{
	json_t *cases = json_array(), *c;
	long long t0 = now_ns();
	size_t i;
	int ret = 0;

	add_case(cases, p, &p->smoke, p->dtypes[0]);
	for (int d = 0; d < p->n_dtypes; d++) {
		for (int k = 0; k < p->n_test; k++)
			add_case(cases, p, &p->test[k], p->dtypes[d]);
		for (int k = 0; k < p->n_edge; k++)
			add_case(cases, p, &p->edge[k], p->dtypes[d]);
		add_case(cases, p, &p->bench, p->dtypes[d]);
	}
	/* A case at a time, each under twice the time limit of a call: a
	 * compile is slower than a call, a hang is found as soon. */
	json_array_foreach(cases, i, c)
		if ((ret = warm_one(r, slot, c, 2 * r->timeout_ms, why)) < 0)
			break;
	trace("judge", "triton warm-up of slot %d: %zu cases in %.2f ms", slot,
	      json_array_size(cases), ms_since(t0));
	json_decref(cases);
	return ret;
}
