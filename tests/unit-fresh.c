/*
 * unit-fresh.c: the benchmark's fresh inputs (include/ak-wire.h).  The
 * generator's f16 and bf16 rounding agrees with the tool's own (ops/
 * dtype.c) on every value it can make; consecutive calls never see equal
 * input bytes; and a runner's device makes the same bytes as the host
 * regenerates to check a call (AK_FRESH_BACKEND: host, the default, or
 * cuda / hip in make check-gpu).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ak-wire.h"
#include "ops/dtype.h"
#include "verify/cases.h"
#include "tests/tap.h"

/* Every value ak_gen_normal() can make at sd 1, 2^-7, 2^-12 (f16's
 * subnormals, ties among them) and 2^4, rounded. */
static int rounding_agrees(enum ak_dtype dt)
{
	static const float sds[] = { 1.0f, 0.0078125f, 0.000244140625f, 16.0f };
	int bad = 0;

	for (size_t k = 0; k < ARRAY_SIZE(sds); k++)
		for (int z = -8190; z <= 8190; z++) {
			float v = (float)z * (sds[k] / 2048.0f);
			uint16_t ours = dt == AK_F16 ? ak_f32_to_f16(v) :
				ak_f32_to_bf16(v), tool;

			dtype_store(dt, &tool, 0, v);
			bad += ours != tool;
		}
	return bad;
}

/* n elements of input t under seed through ak_gen_table(), as the bench
 * regenerates a 16-bit input: how many differ from ak_gen_store()'s. */
static int64_t table_differs(enum ak_dtype dt, float mean, float sd,
			     int64_t n, uint64_t seed)
{
	struct ak_gen g = { AK_GEN_NORMAL, mean, sd, 0 };
	static uint16_t table[2 * AK_GEN_Z + 1];
	uint16_t *want = xmalloc((size_t)n * sizeof(*want));
	int64_t bad = 0;

	ak_gen_table(table, dt, &g);
	for (int64_t i = 0; i < n; i++) {
		ak_gen_store(want, dt, (uint64_t)i, seed, 1, &g);
		bad += table[ak_gen_z(ak_mix(seed, 1, (uint64_t)i)) +
			     AK_GEN_Z] != want[i];
	}
	free(want);
	return bad;
}

/* Two calls' inputs of n elements: how many bytes are equal. */
static size_t equal_bytes(enum ak_dtype dt, int64_t n, uint64_t k)
{
	struct ak_gen g = { AK_GEN_NORMAL, 0.0f, 1.0f, 0 };
	size_t bytes = (size_t)n * dtype_size(dt), same = 0;
	unsigned char *a = xmalloc(bytes), *b = xmalloc(bytes);
	uint64_t base = 12345;

	for (int64_t i = 0; i < n; i++) {
		ak_gen_store(a, dt, (uint64_t)i, ak_call_seed(base, k), 0, &g);
		ak_gen_store(b, dt, (uint64_t)i, ak_call_seed(base, k + 1), 0, &g);
	}
	same = !memcmp(a, b, bytes) ? bytes : 0;
	free(a);
	free(b);
	return same;
}

/* The runner's "gen" against the host: 0 when every byte agrees. */
static int device_agrees(const char *backend, enum ak_dtype dt,
			 const char *kind, int64_t n, uint64_t seed)
{
	struct runner r = RUNNER_INIT;
	struct strbuf why = STRBUF_INIT;
	struct ak_gen g = { AK_GEN_NORMAL, 0.5f, 0.25f, n };
	size_t bytes = (size_t)n * dtype_size(dt);
	unsigned char *host = xmalloc(bytes), *shm;
	json_t *req, *res;
	int bad = -1;

	if (!strcmp(kind, "index"))
		g.kind = AK_GEN_INDEX;
	for (int64_t i = 0; i < n; i++)
		ak_gen_store(host, dt, (uint64_t)i, seed, 0, &g);
	if (runner_start(&r, backend, 60000, &why) < 0) {
		printf("# no %s device: %s\n", backend, why.buf);
		goto cleanup;
	}
	shm = runner_shm(&r, bytes + 4096);
	memset(shm, 0, bytes);
	req = json_pack("{s:s,s:s,s:I,s:[{s:i,s:[I],s:i,s:b}],s:[{s:s,s:f,"
			"s:f,s:I}],s:I}", "req", "gen", "shm", r.shm_path,
			"size", (json_int_t)r.shm_size, "tensors", "dtype",
			(int)dt, "shape", (json_int_t)n, "offset", 0, "out", 0,
			"gen", "kind", kind, "mean", 0.5, "sd", 0.25, "n",
			(json_int_t)n, "seed", (json_int_t)seed);
	res = runner_request(&r, req, 60000, &why);
	if (res && json_is_true(json_object_get(res, "ok")))
		bad = memcmp(host, shm, bytes) != 0;
	else
		printf("# gen failed: %s\n", res ? json_string_value(
			json_object_get(res, "error")) : why.buf);
	json_decref(req);
	json_decref(res);
cleanup:
	runner_stop(&r);
	strbuf_release(&why);
	free(host);
	return bad;
}

int main(void)
{
	const char *backend = getenv("AK_FRESH_BACKEND");
	static const enum ak_dtype dts[] = { AK_F16, AK_BF16, AK_F32 };

	dtype_init();
	if (!backend || !*backend)
		backend = "host";
	/* the runners are beside the tool, which make check names */
	if (getenv("AK_BUILD") && !getenv("AUTOKERNEL_LIBEXEC"))
		setenv("AUTOKERNEL_LIBEXEC", getenv("AK_BUILD"), 1);
	ok(rounding_agrees(AK_F16) == 0, "f16 rounding agrees with the tool's");
	ok(rounding_agrees(AK_BF16) == 0, "bf16 rounding agrees with the tool's");
	for (size_t i = 0; i < 2; i++) {
		const enum ak_dtype dt = dts[i];

		ok(table_differs(dt, 0.0f, 1.0f, 1 << 20, 5) == 0 &&
		   table_differs(dt, 0.5f, 0.25f, 1 << 20, 6) == 0 &&
		   table_differs(dt, -3.0f, 0.0078125f, 1 << 20, 7) == 0 &&
		   table_differs(dt, 0.0f, 0.000244140625f, 1 << 20, 8) == 0,
		   "%s: the table the bench regenerates with makes the "
		   "generator's bits", dtype_name(dt));
	}
	for (uint64_t k = 0; k < 4; k++)
		ok(equal_bytes(AK_F16, 4096, k) == 0 &&
		   equal_bytes(AK_F32, 1, k) == 0,
		   "calls %llu and %llu see different inputs",
		   (unsigned long long)k, (unsigned long long)k + 1);
	for (size_t i = 0; i < ARRAY_SIZE(dts); i++)
		ok(device_agrees(backend, dts[i], "normal", 1 << 20, 77 + i) == 0,
		   "the %s runner makes the host's %s bytes", backend,
		   dtype_name(dts[i]));
	ok(device_agrees(backend, AK_I64, "index", 100003, 99) == 0,
	   "the %s runner makes the host's i64 indices", backend);
	return tap_done();
}
