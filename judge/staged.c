#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ops/dtype.h"
#include "judge/staged.h"
#include "lib/history.h"
#include "judge/judge.h"
#include "lib/cell.h"
#include "lib/records.h"
#include "lib/repo.h"
#include "lib/result.h"

static git_tree *commit_tree(const git_oid *commit)
{
	git_commit *c = NULL;
	git_tree *t = NULL;

	if (commit && git_commit_lookup(&c, repo_need(), commit) == 0)
		git_commit_tree(&t, c);
	git_commit_free(c);
	return t;
}

/* Which paths the candidate may change: on the baseline, anything under
 * <name>/; afterwards only the kernel file.  0, or AK_EUSAGE after an
 * error message. */
static int check_paths(const char *name, const git_oid *tree,
		       git_tree *head_tree, int baseline, const char *kernel)
{
	git_tree *t = NULL;
	git_diff *diff = NULL;
	struct strbuf dir = STRBUF_INIT, kpath = STRBUF_INIT, bad = STRBUF_INIT;
	int kernel_changed = 0, ret = 0;

	strbuf_addf(&dir, "%s/", name);
	strbuf_addf(&kpath, "%s/%s", name, kernel);
	if (git_tree_lookup(&t, repo_need(), tree) < 0 ||
	    git_diff_tree_to_tree(&diff, repo_need(), head_tree, t, NULL) < 0) {
		ret = error("unable to diff the staged tree: %s", repo_error());
		goto cleanup;
	}
	for (size_t i = 0; i < git_diff_num_deltas(diff); i++) {
		const git_diff_delta *d = git_diff_get_delta(diff, i);
		const char *p = d->new_file.path ? d->new_file.path :
			d->old_file.path;

		if (!strcmp(p, kpath.buf) && d->status != GIT_DELTA_DELETED)
			kernel_changed = 1;
		else if (!baseline || !starts_with(p, dir.buf))
			strbuf_addf(&bad, "\n\t%s", p);
	}
	if (bad.len)
		ret = error("an experiment commit on autokernel/%s may change "
			    "only '%s'%s; this one also changes:%s", name,
			    kpath.buf, baseline ? " and the files of its "
			    "directory" : " (problem.json is fixed after the "
			    "baseline)", bad.buf);
	else if (!kernel_changed && !baseline)
		ret = error("the staged tree does not change '%s': nothing to "
			    "judge", kpath.buf);
	if (ret)
		ret = AK_EUSAGE;
cleanup:
	git_diff_free(diff);
	git_tree_free(t);
	strbuf_release(&dir);
	strbuf_release(&kpath);
	strbuf_release(&bad);
	return ret;
}

static int load_rev(struct candidate *c, const git_oid *id, const char *name,
		    const char *label, const char *where)
{
	char hex[GIT_OID_HEXSZ + 1];
	int rc;

	git_oid_tostr(hex, sizeof(hex), id);
	c->where = where;
	rc = candidate_load(c, hex, name);
	if (!rc)
		snprintf(c->label, sizeof(c->label), "%s", label);
	return rc;
}

/*
 * The judgement's result is made in two parts: in r the typed fields
 * (what it judged, the verdict, the figures); in res the objects of the
 * other parts (the problem, the device, the stages' and the benchmark's
 * results) and the judge's own keys (head, baseline, seconds ...).
 * result_to_note() makes them one note at the end.
 */
struct judging {
	const char *name;
	const git_oid *tree, *head;
	git_oid base;
	int baseline, have_base;
	struct candidate cand, best, first;
	struct judge j;
	struct cases *cases;    /* inputs, references: made while it builds */
	FILE *out;
	struct result r;        /* its strings: kpath, tree_hex, verdict,
				 * cand's, or static */
	char tree_hex[GIT_OID_HEXSZ + 1];
	struct strbuf kpath, verdict;
	json_t *res;
};

static void result_base(struct judging *x)
{
	char *problem = problem_dump(&x->cand.p);

	strbuf_addf(&x->kpath, "%s/%s", x->name, x->cand.p.kernel);
	git_oid_tostr(x->tree_hex, sizeof(x->tree_hex), x->tree);
	x->r.version = 1;
	x->r.tool = AK_VERSION;
	x->r.name = x->name;
	x->r.op = x->cand.p.op->name;
	x->r.backend = x->cand.p.backend;
	x->r.kernel_path = x->kpath.buf;
	x->r.tree = x->tree_hex;
	x->res = json_pack("{s:o,s:O}", "problem", json_loads(problem, 0, NULL),
			   "device", x->j.device);
	json_object_set_new(x->res, "head", x->head ?
		json_string(git_oid_tostr_s(x->head)) : json_null());
	if (x->j.ceilings)
		json_object_set(x->res, "ceilings", x->j.ceilings);
	/* the record of a judgement made outside the cell says so */
	if (!cell_enabled())
		json_object_set_new(x->res, "sandbox", json_false());
	/* What the run loop knows of the agent: its name and token usage. */
	if (getenv("AUTOKERNEL_AGENT"))
		json_object_set_new(x->res, "agent",
				    json_string(getenv("AUTOKERNEL_AGENT")));
	if (getenv("AUTOKERNEL_USAGE"))
		json_object_set_new(x->res, "tokens",
			json_loads(getenv("AUTOKERNEL_USAGE"), 0, NULL));
	free(problem);
}

/* The verdict is x->verdict, which is not changed after this. */
static void reject(struct judging *x, const char *reason)
{
	x->r.keep = 0;
	x->r.status = "rejected";
	x->r.reason = reason;
	x->r.verdict = x->verdict.buf;
}

/* Build and the five stages of the candidate; 0 passed, 1 rejected, or
 * AK_EENV: no device or toolchain (after an error message). */
static int judge_candidate(struct judging *x)
{
	json_t *vr = NULL;
	long long t0 = now_ns();
	int rc;

	phase("building");
	rc = judge_build(&x->j, &x->cand, 0, &x->verdict);

	if (rc == AK_EENV)
		return AK_EENV;
	/* the device the runner found, now that it said hello, and its
	 * ceilings (read again if it is not the one the cache named) */
	json_object_set(x->res, "device", x->j.device);
	if (judge_ceilings(&x->j, 0))
		json_object_set(x->res, "ceilings", x->j.ceilings);
	fprintf(x->out, "  build        %-4s %6.2f s\n", rc ? "FAIL" : "ok",
		(now_ns() - t0) / 1e9);
	if (rc < 0) {
		fprintf(x->out, "%s\n", x->verdict.buf);
		reject(x, "build");
		return 1;
	}
	rc = judge_run_stages(&x->j, &x->cand.p, x->cases, 0, &vr,
			      &x->verdict, x->out);
	json_object_set_new(x->res, "verify", vr);
	if (rc) {
		reject(x, "verify");
		return 1;
	}
	return 0;
}

static double med(json_t *bench, int i)
{
	return json_number_value(json_object_get(json_array_get(
		json_object_get(bench, "kernels"), i), "median_us"));
}

/* A candidate this much faster than the best is measured again. */
#define SUSPICIOUS 10.0

static double tot(json_t *wl, const char *key)
{
	return json_number_value(json_object_get(json_object_get(wl, "total"),
						 key));
}

/* The interleaved benchmark of the candidate, HEAD and the baseline at
 * every shape of the workload, a shape ending early once settled (settle:
 * the keep rule's bounds) or never (NULL); 0, or 1 after a rejection. */
static int bench_once(struct judging *x, int n, double scale,
		      const struct settle *settle, json_t **wl)
{
	static const int slots[3] = { 0, 1, 2 };

	if (judge_run_bench(&x->j, &x->cand.p, slots, n, scale, settle, wl,
			    &x->verdict)) {
		json_object_set_new(x->res, "workload", *wl ? *wl : json_null());
		*wl = NULL;
		reject(x, "integrity");
		return 1;
	}
	return 0;
}

/*
 * A candidate more than ten times faster than the best is more likely a
 * harness bug or a trick than a discovery: it is judged again by a fresh
 * runner process with twice the timed calls, none of its shapes ended
 * early (it would settle at once), and that second run stands.
 */
static int bench_suspicious(struct judging *x, int n, json_t **wl)
{
	double ratio = tot(*wl, "best_us") / tot(*wl, "candidate_us");

	if (n < 2 || !(ratio > SUSPICIOUS))
		return 0;
	fprintf(x->out, "  %.1fx faster than HEAD: judged again by a fresh "
		"runner with twice the timed calls\n", ratio);
	json_object_set_new(x->res, "rejudged", json_pack("{s:f,s:f}",
		"head_ratio", ratio, "time_us", tot(*wl, "candidate_us")));
	json_decref(*wl);
	*wl = NULL;
	runner_recycle(&x->j.r);
	return bench_once(x, n, 2.0, NULL, wl);
}

/*
 * A candidate faster over the workload but slower at one shape is judged
 * again by a fresh runner, and that second run stands (its figures, its
 * verdict).  A shape whose code the candidate did not change has read
 * slower beyond its noise by 0.3 to 1.7% (doc/results/h{100,200}/shapes.md,
 * sessions 17-24), a difference between runs that one run's quartiles do
 * not show; a real regression reads slower in the second run too.  The
 * first run's figures and verdict stay in the note (shape_rejudged).
 */
static int bench_shape_again(struct judging *x, int n,
			     const struct settle *settle, json_t **wl)
{
	struct strbuf why = STRBUF_INIT;
	int rc = 0;

	if (n >= 2 && !workload_keep(*wl, config_min_gain(),
				     config_max_shape_regression(), &why) &&
	    starts_with(why.buf, "slower at ")) {
		fprintf(x->out, "  %s: judged again by a fresh runner, whose "
			"run stands\n", why.buf);
		json_object_set_new(x->res, "shape_rejudged", json_pack(
			"{s:s,s:o}", "verdict", why.buf, "workload", *wl));
		*wl = NULL;
		runner_recycle(&x->j.r);
		rc = bench_once(x, n, 1.0, settle, wl);
	}
	strbuf_release(&why);
	return rc;
}

/* A line per shape: the candidate, HEAD, the baseline, the floor. */
static void print_shapes(struct judging *x, json_t *wl, int n)
{
	json_t *sh;
	size_t i;
	char words[64];

	json_array_foreach(json_object_get(wl, "shapes"), i, sh) {
		json_t *ks = json_object_get(sh, "kernels");

		fprintf(x->out, "  bench %s %s", json_string_value(
			json_object_get(sh, "shape")), json_string_value(
			json_object_get(sh, "dtype")));
		if (json_array_size(json_object_get(wl, "shapes")) > 1)
			fprintf(x->out, " (weight %.2f)", json_number_value(
				json_object_get(sh, "weight")));
		fprintf(x->out, ": %.2f us", med(sh, 0));
		if (n > 1)
			fprintf(x->out, ", HEAD %.2f us", med(sh, 1));
		if (n > 2)
			fprintf(x->out, ", baseline %.2f us", med(sh, 2));
		fprintf(x->out, ", floor %.2f us (%s)\n", json_number_value(
			json_object_get(sh, "floor_us")), result_floor_words(
			json_number_value(json_object_get(json_array_get(ks, 0),
			"roofline")), "it", words, sizeof(words)));
	}
	if (json_array_size(json_object_get(wl, "shapes")) > 1)
		fprintf(x->out, "  weighted total: %.2f us%s\n",
			tot(wl, "candidate_us"), n > 1 ? "" : " (baseline)");
}

static int judge_bench(struct judging *x)
{
	int n = 1;
	json_t *wl = NULL;
	double t, speedup = 1;
	struct settle st = { config_min_gain(), config_max_shape_regression() };
	const struct settle *settle = &st;

	if (!x->baseline)
		n = x->have_base ? 3 : 2;
	phase("benchmark");
	/* autokernel.earlyStop=false: every shape times all its calls */
	if (!config_bool("autokernel.earlyStop", 1))
		settle = NULL;
	if (bench_once(x, n, 1.0, settle, &wl) ||
	    bench_suspicious(x, n, &wl) ||
	    bench_shape_again(x, n, settle, &wl))
		return 1;
	json_object_set_new(x->res, "workload", wl);
	/* the first shape's figures where one bench was read before */
	json_object_set(x->res, "bench", json_array_get(json_object_get(wl,
		"shapes"), 0));
	t = tot(wl, "candidate_us");
	if (n == 2)
		speedup = tot(wl, "best_us") / t;
	if (n == 3)
		speedup = tot(wl, "baseline_us") / t;
	/* the figure the keep rule decides on: the best against the
	 * candidate in this same interleaved run */
	if (n > 1) {
		x->r.head_ratio = tot(wl, "best_us") / t;
		x->r.has |= RESULT_HAS_HEAD_RATIO;
	}
	print_shapes(x, wl, n);
	x->r.time_us = t;
	x->r.speedup = speedup;
	x->r.roofline = tot(wl, "floor_us") / t;
	x->r.has |= RESULT_HAS_TIME_US | RESULT_HAS_SPEEDUP |
		RESULT_HAS_ROOFLINE;
	return 0;
}

static void decide(struct judging *x)
{
	struct strbuf why = STRBUF_INIT;
	int keep = 1;

	if (!x->baseline)
		keep = workload_keep(json_object_get(x->res, "workload"),
				     config_min_gain(),
				     config_max_shape_regression(), &why);
	else
		strbuf_addstr(&why, "baseline: verified and measured");
	strbuf_reset(&x->verdict);
	strbuf_addbuf(&x->verdict, &why);
	if (!keep) {
		/* slower beyond the noise, or not faster beyond it (or by
		 * less than minGain): reasons of git-autokernel(1), JUDGING */
		reject(x, starts_with(why.buf, "slower at") ? "shape" :
		       starts_with(why.buf, "slower") ? "slower" : "noise");
	} else {
		x->r.keep = 1;
		x->r.status = x->baseline ? "baseline" : "kept";
		x->r.verdict = x->verdict.buf;
	}
	strbuf_release(&why);
}

static int load_others(struct judging *x)
{
	struct strbuf v = STRBUF_INIT;
	int rc;

	if ((rc = load_rev(&x->best, x->head, x->name, "HEAD", "HEAD")) ||
	    (rc = judge_build(&x->j, &x->best, 1, &v))) {
		error("HEAD's kernel no longer builds or loads: %s", v.buf);
		strbuf_release(&v);
		return AK_EENV;
	}
	if (!history_baseline(&x->base, x->name, x->head) &&
	    !git_oid_equal(&x->base, x->head)) {
		x->have_base = 1;
		if ((rc = load_rev(&x->first, &x->base, x->name, "baseline",
				     "the baseline")) ||
		    (rc = judge_build(&x->j, &x->first, 2, &v))) {
			warning("the baseline's kernel does not build: %s; "
				"speedup is against HEAD", v.buf);
			x->have_base = 0;
		}
		json_object_set_new(x->res, "baseline",
				    json_string(git_oid_tostr_s(&x->base)));
	}
	strbuf_release(&v);
	return 0;
}

int experiment_judge(json_t **res, const char *name, const git_oid *tree,
		     const git_oid *head, FILE *out)
{
	struct judging x = { .name = name, .tree = tree, .head = head,
			     .cand = CANDIDATE_INIT, .best = CANDIDATE_INIT,
			     .first = CANDIDATE_INIT, .j = JUDGE_INIT,
			     .out = out, .r = RESULT_INIT,
			     .kpath = STRBUF_INIT, .verdict = STRBUF_INIT };
	struct strbuf ppath = STRBUF_INIT;
	git_tree *ht = commit_tree(head);
	long long t0 = now_ns();
	int rc;

	*res = NULL;
	strbuf_addf(&ppath, "%s/problem.json", name);
	x.baseline = !history_tree_has(ht, ppath.buf);
	if ((rc = load_rev(&x.cand, tree, name, "staged",
				 "the staged tree")))
		goto cleanup;
	if ((rc = check_paths(name, tree, ht, x.baseline, x.cand.p.kernel)))
		goto cleanup;
	trace("judge", "%s: judging starts", name);
	if ((rc = judge_start(&x.j, x.cand.p.backend)))
		goto cleanup;
	judge_ceilings(&x.j, 0);
	trace("judge", "runner started");
	if (!x.j.started) {             /* the device did not answer */
		rc = AK_EENV;
		goto cleanup;
	}
	x.cases = cases_start(&x.cand.p, x.cand.p.dtypes[0]);
	cases_map(x.cases, &x.j.r);
	fprintf(out, "autokernel: judging %s/%s (staged) %s on %s\n", name,
		x.cand.p.kernel, x.baseline ? "as the baseline" :
		"against HEAD", judge_device_name(&x.j));
	/* problem.json is fixed from the baseline on: say it there */
	if (x.baseline)
		problem_loose_tolerances(&x.cand.p, ppath.buf, NULL);
	result_base(&x);
	if ((rc = judge_candidate(&x)) == AK_EENV)
		goto cleanup;
	if (rc)
		goto done;
	trace("judge", "candidate built and verified");
	if (!x.baseline && (rc = load_others(&x)))
		goto cleanup;
	trace("judge", "HEAD and baseline loaded");
	if (judge_bench(&x))
		goto done;
	trace("judge", "benchmarked");
	decide(&x);
done:
	json_object_set_new(x.res, "seconds", json_real((now_ns() - t0) / 1e9));
	fprintf(out, "  judged in %.2f s (%.2f s of it waiting for the device "
		"to start", (now_ns() - t0) / 1e9, x.j.waited);
	if (x.j.device_wait >= 0.005) {
		/* another judge had the device: a worker's benchmark */
		json_object_set_new(x.res, "device_wait_s",
				    json_real(x.j.device_wait));
		fprintf(out, ", %.2f s for its lock", x.j.device_wait);
	}
	fprintf(out, ")\n");
	/* the build's log was shown above: its first line is enough here */
	fprintf(out, "  verdict: %s: %.*s\n", x.r.keep == 1 ? "keep" :
		"reject", (int)strcspn(x.verdict.buf, "\n"), x.verdict.buf);
	x.r.note = x.res;       /* r holds it now */
	x.res = NULL;
	*res = result_to_note(&x.r);
	rc = 0;
cleanup:
	cases_free(x.cases);
	result_release(&x.r);
	json_decref(x.res);
	judge_stop(&x.j);
	candidate_release(&x.cand);
	candidate_release(&x.best);
	candidate_release(&x.first);
	git_tree_free(ht);
	strbuf_release(&ppath);
	strbuf_release(&x.kpath);
	strbuf_release(&x.verdict);
	/* a staged tree whose problem.json or kernel cannot be read is
	 * refused, as one that changes other files is */
	return rc == -1 ? AK_EUSAGE : rc;
}

static void add_trailers(struct strbuf *msg, const struct result *res,
			 int kept)
{
	char verify[64], t[32], sp[32], rf[32];
	struct trailer tr[8];
	int n = 0;

	snprintf(verify, sizeof(verify), "%s %d/5", res->verify_pass == 1 ?
		 "pass" : "fail", res->stages_passed);
	tr[n++] = (struct trailer){ "Autokernel-Op", res->op };
	tr[n++] = (struct trailer){ "Autokernel-Backend", res->backend };
	tr[n++] = (struct trailer){ "Autokernel-Device", res->device_name };
	tr[n++] = (struct trailer){ "Autokernel-Verify", verify };
	if (res->has & RESULT_HAS_TIME_US) {
		double us = res->time_us;

		snprintf(t, sizeof(t), us < 100 ? "%.2f" : "%.1f", us);
		snprintf(sp, sizeof(sp), "%.2fx", res->speedup);
		snprintf(rf, sizeof(rf), "%.0f%%", 100 * res->roofline);
		tr[n++] = (struct trailer){ "Autokernel-Time-Us", t };
		if (kept) {
			tr[n++] = (struct trailer){ "Autokernel-Speedup", sp };
			tr[n++] = (struct trailer){ "Autokernel-Roofline", rf };
		}
	}
	if (!kept)
		tr[n++] = (struct trailer){ "Autokernel-Verdict", "rejected" };
	for (int i = 0; i < n; i++)
		if (!tr[i].value)
			tr[i].value = "unknown";
	trailers_apply(msg, tr, n);
}

static void subject_or_default(struct strbuf *msg, const char *def)
{
	strbuf_trim(msg);
	if (!msg->len)
		strbuf_addstr(msg, def);
}

void experiment_kept_message(struct strbuf *msg, const struct result *res)
{
	const struct result_bench *b = &res->bench;
	struct strbuf body = STRBUF_INIT;

	subject_or_default(msg, "unnamed experiment");
	if (b->shape && !strstr(msg->buf, "\n\nMeasured at ")) {
		strbuf_addf(&body, "\n\nMeasured at %s %s: %.2f us", b->shape,
			    b->dtype, b->median_us[0]);
		if (b->kernels > 1)
			strbuf_addf(&body, " against %.2f us for the parent",
				    b->median_us[1]);
		strbuf_addf(&body, ", floor %.2f us (%s). %s.", b->floor_us,
			    b->floor_kind, res->verdict);
		/* the body goes between the subject and any trailers */
		strbuf_addbuf(msg, &body);
	}
	add_trailers(msg, res, 1);
	strbuf_release(&body);
}

void experiment_attempt_message(struct strbuf *out, const char *msg,
				const struct result *res)
{
	strbuf_addstr(out, msg);
	subject_or_default(out, "(no message)");
	strbuf_addf(out, "\n\nRejected (%s): %s", res->reason, res->verdict);
	add_trailers(out, res, 0);
}
