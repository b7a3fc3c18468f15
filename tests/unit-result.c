/*
 * unit-result.c: notes read into struct result and written back
 * (lib/result.h), in TAP: a note of a workload, one made before
 * workloads, one from trailers; a note read and written keeps its bytes;
 * a note made from a struct is the one judge/loop.c wrote by hand.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "tests/tap.h"
#include "lib/records.h"
#include "lib/result.h"

/* Two shapes, the second of which did not finish (no roofline). */
static const char workload_note[] =
	"{\"version\": 1, \"tool\": \"0.1.0\", \"name\": \"softmax\","
	" \"op\": \"softmax\", \"backend\": \"host\","
	" \"kernel_path\": \"softmax/kernel.c\", \"tree\": \"abc\","
	" \"keep\": false, \"status\": \"rejected\", \"reason\": \"slower\","
	" \"verdict\": \"slower: 2.00 us vs 1.00 us\", \"time_us\": 2.5,"
	" \"speedup\": 3.0, \"roofline\": 0.0, \"head_ratio\": 0.5,"
	" \"verify\": {\"pass\": true, \"stages_passed\": 5},"
	" \"device\": {\"name\": \"cpu\", \"arch\": \"x86\"},"
	" \"problem\": {\"dtypes\": [\"f32\"]}, \"attempt\": 3,"
	" \"tokens\": {\"input\": 10, \"output\": 2},"
	" \"bench\": {\"shape\": \"4x8\", \"dtype\": \"f32\","
	"  \"kernels\": [{\"median_us\": 2.0, \"roofline\": 0.25},"
	"   {\"median_us\": 1.0, \"roofline\": 0.5}],"
	"  \"floor_us\": 0.5, \"floor_kind\": \"copy\", \"bytes\": 256.0},"
	" \"workload\": {\"shapes\": ["
	"  {\"shape\": \"4x8\", \"dtype\": \"f32\", \"weight\": 0.75,"
	"   \"kernels\": [{\"median_us\": 2.0, \"roofline\": 0.25}],"
	"   \"floor_us\": 0.5},"
	"  {\"shape\": \"2x2\", \"dtype\": \"f32\", \"weight\": 0.25,"
	"   \"kernels\": [{\"n\": 0}], \"floor_us\": 0.1}]}}";

/* Before workloads and head_ratio; an integer where reals are now. */
static const char old_note[] =
	"{\"status\": \"kept\", \"keep\": true, \"time_us\": 4,"
	" \"reason\": \"slower\", \"verdict\": \"not faster: 4 us\","
	" \"bench\": {\"shape\": \"4x8\", \"dtype\": \"f32\","
	"  \"kernels\": [{\"median_us\": 4.0, \"roofline\": 0.125},"
	"   {\"median_us\": 6.0}], \"floor_us\": 0.5}}";

static char *dump(json_t *j)
{
	return json_dumps(j, JSON_INDENT(1) | JSON_SORT_KEYS);
}

/* Whether text read and written back comes out as note_write() wrote
 * it. */
static int same_bytes(const char *text)
{
	json_t *in = json_loads(text, 0, NULL), *out;
	struct result r;
	char *a, *b;
	int same;

	result_from_note(&r, in);
	out = result_to_note(&r);
	a = dump(in);
	b = dump(out);
	same = !strcmp(a, b);
	free(a);
	free(b);
	json_decref(out);
	json_decref(in);
	result_release(&r);
	return same;
}

static void test_workload(void)
{
	json_t *n = json_loads(workload_note, 0, NULL);
	struct result r;

	ok(result_from_note(&r, n) == 0 && r.note == n, "a note is read");
	ok(r.keep == 0 && !strcmp(r.status, "rejected") &&
	   !strcmp(r.reason, "slower") && !strcmp(result_reason(&r), "slower"),
	   "its verdict");
	ok(r.time_us == 2.5 && r.speedup == 3 && r.roofline == 0 &&
	   r.head_ratio == 0.5 && r.has == (RESULT_HAS_TIME_US |
	   RESULT_HAS_SPEEDUP | RESULT_HAS_ROOFLINE | RESULT_HAS_HEAD_RATIO),
	   "its figures, a roofline of 0 present");
	ok(r.nr_shapes == 1 && !strcmp(r.shapes[0].shape, "4x8") &&
	   r.shapes[0].weight == 0.75 && r.shapes[0].median_us == 2 &&
	   r.shapes[0].roofline == 0.25 && r.shapes[0].floor_us == 0.5,
	   "the shape that finished, not the one without a roofline");
	ok(r.bench.kernels == 2 && r.bench.median_us[1] == 1 &&
	   !strcmp(r.bench.floor_kind, "copy") && r.bench.bytes == 256,
	   "its bench");
	ok(r.verify_pass == 1 && r.stages_passed == 5 &&
	   !strcmp(r.device_name, "cpu") && !strcmp(r.device_arch, "x86") &&
	   json_array_size(r.dtypes) == 1 && r.attempt == 3 &&
	   r.tokens_in == 10 && r.tokens_out == 2, "the rest");
	result_release(&r);
	ok(r.note == NULL && r.keep == -1 && !r.shapes, "released");
	json_decref(n);
}

static void test_old(void)
{
	json_t *n = json_loads(old_note, 0, NULL), *fig;
	struct result r;

	result_from_note(&r, n);
	ok(r.nr_shapes == 1 && r.shapes[0].weight == 1 &&
	   !strcmp(r.shapes[0].dtype, "f32"),
	   "a note without a workload is its bench's one shape");
	ok(fabs(r.head_ratio - 1.5) < 1e-12 && !(r.has &
	   RESULT_HAS_HEAD_RATIO), "its deciding ratio is its bench's");
	ok(!strcmp(result_reason(&r), "noise"),
	   "an older \"slower\" within the noise is noise");
	ok(r.verify_pass == -1 && r.stages_passed == 0 && r.time_us == 4,
	   "no verify; an integer time");
	fig = result_figure(&r, "time_us");
	ok(json_is_integer(fig) && json_integer_value(fig) == 4 &&
	   !result_figure(&r, "speedup"),
	   "a figure passed on as the note wrote it; none where it has none");
	json_decref(fig);
	result_release(&r);
	json_decref(n);

	/* a row whose figures are not numbers did not finish */
	n = json_loads("{\"bench\": {\"shape\": \"4x8\", \"dtype\": \"f32\","
		       " \"kernels\": [{\"median_us\": null, \"roofline\": 1}],"
		       " \"floor_us\": 0.5}}", 0, NULL);
	result_from_note(&r, n);
	ok(r.nr_shapes == 0, "a shape with a null median is left out");
	result_release(&r);
	json_decref(n);
}

static void test_trailers(void)
{
	json_t *n = note_from_trailers("subject\n\nAutokernel-Op: softmax\n"
		"Autokernel-Verify: pass 5/5\nAutokernel-Time-Us: 12.5\n"
		"Autokernel-Speedup: 2.00x\n");
	struct result r;

	result_from_note(&r, n);
	ok(!strcmp(r.op, "softmax") && r.verify_pass == 1 &&
	   r.stages_passed == 5 && r.time_us == 12.5 && r.speedup == 2 &&
	   !(r.has & RESULT_HAS_ROOFLINE) && !r.nr_shapes && !r.bench.shape &&
	   r.head_ratio == 0 && r.keep == -1, "a note from trailers");
	result_release(&r);
	json_decref(n);
}

static void test_bytes(void)
{
	json_t *t = note_from_trailers("s\n\nAutokernel-Verify: fail 1/5\n"
		"Autokernel-Time-Us: 3\nAutokernel-Verdict: rejected\n");
	char *text = dump(t);

	ok(same_bytes(workload_note), "a note read and written keeps its "
	   "bytes");
	ok(same_bytes(old_note), "an old one, its integer too");
	ok(same_bytes(text), "one from trailers");
	ok(same_bytes("{\"keep\": 1, \"status\": 7, \"verify\": []}"),
	   "values of the wrong type stay as they are");
	free(text);
	json_decref(t);
}

static void test_made(void)
{
	struct result r = RESULT_INIT;
	json_t *hand = json_pack("{s:i,s:s,s:b,s:s,s:s,s:s,s:s}", "version",
		1, "tool", "0.1.0", "keep", 0, "status", "rejected", "reason",
		"agent", "verdict", "it failed", "name", "softmax"), *made;
	char *a = dump(hand), *b;

	r.version = 1;
	r.tool = "0.1.0";
	r.keep = 0;
	r.status = "rejected";
	r.reason = "agent";
	r.verdict = "it failed";
	r.name = "softmax";
	made = result_to_note(&r);
	b = dump(made);
	ok(!strcmp(a, b), "a note made from a struct is the one made by hand");
	free(b);
	json_decref(made);
	r.time_us = INFINITY;
	r.roofline = 0.5;
	r.has = RESULT_HAS_TIME_US | RESULT_HAS_ROOFLINE;
	made = result_to_note(&r);
	ok(!json_object_get(made, "time_us") &&
	   json_is_real(json_object_get(made, "roofline")),
	   "an infinite time is left out");
	json_decref(made);
	ok(result_from_note(&r, NULL) == -1 && r.keep == -1 && !r.note,
	   "no note: nothing known");
	r.note = json_pack("{s:{s:s},s:n}", "device", "name", "cpu", "head");
	r.keep = 1;
	r.status = "kept";
	r.time_us = 2;
	r.has = RESULT_HAS_TIME_US;
	made = result_to_note(&r);
	b = dump(made);
	ok(!strcmp(b, "{\n \"device\": {\n  \"name\": \"cpu\"\n },\n"
		   " \"head\": null,\n \"keep\": true,\n \"status\": "
		   "\"kept\",\n \"time_us\": 2.0\n}"),
	   "the fields over the objects collected beside them");
	ok(json_object_size(r.note) == 2, "which are not changed");
	free(b);
	json_decref(made);
	result_release(&r);
	free(a);
	json_decref(hand);
}

/* The words for a kernel against its floor, on both sides of it. */
static void test_floor_words(void)
{
	char b[64];

	ok(!strcmp(result_floor_words(0.874, "it", b, sizeof(b)), "87% of it"),
	   "under the floor: its share");
	ok(!strcmp(result_floor_words(1, "the floor", b, sizeof(b)),
		   "100% of the floor"), "at the floor: all of it");
	ok(!strcmp(result_floor_words(1.094, "it", b, sizeof(b)),
		   "1.09x faster than it"),
	   "past a copy floor: how much faster, not a share over 100");
}

int main(void)
{
	test_floor_words();
	test_workload();
	test_old();
	test_trailers();
	test_bytes();
	test_made();
	return tap_done();
}
