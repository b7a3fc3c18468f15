#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "backends/build.h"
#include "judge/devlock.h"
#include "judge/judge.h"
#include "lib/cell.h"
#include "lib/paths.h"
#include "lib/repo.h"
#include "lib/tempdir.h"
#include "verify/runners.h"

static int is_dir_with_problem(const char *dir)
{
	char p[PATH_MAX + 32];
	struct stat st;

	snprintf(p, sizeof(p), "%s/problem.json", dir);
	return !stat(p, &st);
}

/* The file at path (in the repository) of rev, or of the index when rev
 * is NULL, into text; 0, or -1 said. */
static int read_at(const struct candidate *c, struct strbuf *text,
		   const char *rev, const char *path)
{
	int r = repo_read_file(text, rev, path);

	if (r == 1 && c->where)         /* a commit of the experiment */
		error("'%s' is not in %s: an experiment keeps its problem.json "
		      "and its kernel", path, c->where);
	else if (r == 1)
		error("'%s' is not in %s", path, rev ? rev : "the index");
	return r ? -1 : 0;
}

/* Writes the experiment's files from a revision or the index into a
 * fresh temporary directory. */
static int materialize(struct candidate *c, const char *rev)
{
	struct strbuf text = STRBUF_INIT, path = STRBUF_INIT;
	int ret = -1;

	if (!(c->tmpdir = tempdir_make(repo_autokernel_dir())))
		return -1;
	snprintf(c->dir, sizeof(c->dir), "%s/%s", c->tmpdir, c->name);
	if (mkdir_p(c->dir) < 0)
		return -1;
	strbuf_addf(&path, "%s/problem.json", c->name);
	if (read_at(c, &text, rev, path.buf) < 0 ||
	    problem_parse(&c->p, text.buf, path.buf) < 0)
		goto cleanup;
	strbuf_reset(&path);
	strbuf_addf(&path, "%s/%s", c->name, c->p.kernel);
	strbuf_reset(&text);
	if (read_at(c, &text, rev, path.buf) < 0)
		goto cleanup;
	snprintf(c->src, sizeof(c->src), "%s/%s", c->dir, c->p.kernel);
	ret = write_file_atomic(c->src, text.buf, text.len) < 0 ? -1 : 0;
cleanup:
	strbuf_release(&text);
	strbuf_release(&path);
	return ret;
}

/* The revision's full id and a label for it; -1 when it names nothing. */
static int short_id(struct candidate *c, const char *rev)
{
	git_object *obj = NULL;

	if (git_revparse_single(&obj, repo_need(), rev) < 0)
		return -1;
	git_oid_tostr(c->commit, sizeof(c->commit), git_object_id(obj));
	/* a hash names itself: "3f2a9c1", not "3f2a9c1... (3f2a9c1)" */
	if (strlen(rev) >= 7 && !strncmp(rev, c->commit, strlen(rev)))
		snprintf(c->label, sizeof(c->label), "%.7s", c->commit);
	else
		snprintf(c->label, sizeof(c->label), "%s (%.7s)", rev,
			 c->commit);
	git_object_free(obj);
	return 0;
}

int candidate_load(struct candidate *c, const char *spec, const char *name)
{
	char *branch = NULL;

	if (spec && strcmp(spec, "--index") && is_dir_with_problem(spec)) {
		const char *base;

		if (!realpath(spec, c->dir)) {
			error_errno("cannot resolve '%s'", spec);
			return AK_EENV;
		}
		base = strrchr(c->dir, '/');
		snprintf(c->name, sizeof(c->name), "%s", base ? base + 1 : spec);
		snprintf(c->label, sizeof(c->label), "%s", spec);
		snprintf(c->src, sizeof(c->src), "%s/problem.json", c->dir);
		if (problem_load(&c->p, c->src) < 0)
			return -1;
		snprintf(c->src, sizeof(c->src), "%s/%s", c->dir, c->p.kernel);
		return 0;
	}
	if (!repo_get()) {
		if (spec) {
			error("'%s' is not a kernel directory (no problem.json)",
			      spec);
			return AK_EUSAGE;
		}
		if (is_dir_with_problem("."))
			return candidate_load(c, ".", name);
		error("not in a git repository and no problem.json here");
		return AK_EENV;
	}
	if (!name)
		name = branch = repo_branch_name();
	if (!name) {
		if (!spec && is_dir_with_problem("."))
			return candidate_load(c, ".", NULL);
		error("not on an autokernel/* branch: check one out or name "
		      "a kernel directory");
		return AK_EENV;
	}
	snprintf(c->name, sizeof(c->name), "%s", name);
	free(branch);
	if (!spec) {
		if (git_repository_is_bare(repo_need())) {
			error("no work tree");
			return AK_EENV;
		}
		snprintf(c->dir, sizeof(c->dir), "%s%s", repo_workdir(), c->name);
		snprintf(c->label, sizeof(c->label), "work tree");
		snprintf(c->src, sizeof(c->src), "%s/problem.json", c->dir);
		if (problem_load(&c->p, c->src) < 0)
			return -1;
		snprintf(c->src, sizeof(c->src), "%s/%s", c->dir, c->p.kernel);
		return 0;
	}
	if (!strcmp(spec, "--index")) {
		snprintf(c->label, sizeof(c->label), "index");
		return materialize(c, NULL);
	}
	snprintf(c->label, sizeof(c->label), "%s", spec);
	if (short_id(c, spec) < 0) {
		error("unknown revision '%s'", spec);
		return AK_EUSAGE;
	}
	return materialize(c, spec);
}

void candidate_release(struct candidate *c)
{
	tempdir_remove(c->tmpdir);
	free(c->tmpdir);
	free(c->so);
	c->tmpdir = c->so = NULL;
}

static void host_name(char *host, size_t n)
{
	memset(host, 0, n);
	if (gethostname(host, n - 1) < 0 || !*host)
		snprintf(host, n, "unknown");
}

/* The variable that picks a backend's devices (`run --gpus` sets it). */
static const char *visible_devices(const char *backend)
{
	const char *v = NULL;

	if (!strcmp(backend, "hip"))
		v = getenv("HIP_VISIBLE_DEVICES");
	if (!strcmp(backend, "hip") && !(v && *v))
		v = getenv("ROCR_VISIBLE_DEVICES");
	if (strcmp(backend, "host") && !(v && *v))
		v = getenv("CUDA_VISIBLE_DEVICES");
	return v && *v ? v : NULL;
}

static void add_sanitized(struct strbuf *sb, const char *s)
{
	for (; *s; s++)
		strbuf_addch(sb, isalnum((unsigned char)*s) ?
			     tolower((unsigned char)*s) : '-');
}

/* The last hello of this machine's runner for a backend and the devices
 * it is given, in the cache: a worker pinned to a GPU has its own. */
static void hello_path(struct strbuf *path, const char *backend)
{
	const char *dev = visible_devices(backend);
	char host[256];

	host_name(host, sizeof(host));
	strbuf_addf(path, "%s/hello-%s-%s", ak_cachedir(), backend, host);
	if (dev) {
		strbuf_addstr(path, "-dev");
		add_sanitized(path, dev);
	}
	strbuf_addstr(path, ".json");
}

/* What tells the device from others of its kind, for file names: its
 * UUID, else its PCI bus id on this host; nothing for the host backend
 * (the host is the device) or a hello without either. */
static void device_id(struct judge *j, struct strbuf *out)
{
	const char *uuid = json_string_value(json_object_get(j->device,
							   "uuid"));
	const char *bus = json_string_value(json_object_get(j->device,
							  "pci_bus_id"));
	char host[256];

	host_name(host, sizeof(host));
	if (!strcmp(j->backend, "host"))
		return;
	if (uuid) {
		add_sanitized(out, uuid);
	} else if (bus) {
		add_sanitized(out, host);
		strbuf_addch(out, '-');
		add_sanitized(out, bus);
	}
}

void judge_device_key(struct judge *j, struct strbuf *out)
{
	const char *dev = visible_devices(j->backend);
	char host[256];
	size_t len;

	host_name(host, sizeof(host));
	strbuf_addf(out, "%s-", j->backend);
	len = out->len;
	device_id(j, out);
	if (out->len == len) {
		add_sanitized(out, host);
		if (dev) {
			strbuf_addch(out, '-');
			add_sanitized(out, dev);
		}
	}
}

/* The host backend's kernels need every core; a GPU judge takes them
 * all, or AUTOKERNEL_THREADS (a worker's share, bin/run-pool.c). */
static int judge_threads(const char *backend)
{
	const char *env = getenv("AUTOKERNEL_THREADS");

	if (!strcmp(backend, "host"))
		return 1;
	if (env && atoi(env) > 0)
		return atoi(env);
	return (int)sysconf(_SC_NPROCESSORS_ONLN);
}

int judge_start(struct judge *j, const char *backend)
{
	struct strbuf why = STRBUF_INIT, path = STRBUF_INIT;
	json_t *last;

	snprintf(j->backend, sizeof(j->backend), "%s", backend);
	verify_set_threads(judge_threads(backend));
	if (runner_present(backend, &why) < 0) {
		error("%s", why.buf);
		strbuf_release(&why);
		return AK_EENV;
	}
	if (runner_spawn(&j->r, backend, config_timeout_ms(), &why) < 0) {
		error("no %s device: %s", backend, why.buf);
		strbuf_release(&why);
		runner_stop(&j->r);
		return AK_EENV;
	}
	strbuf_release(&why);
	j->started = 1;
	j->pending = 1;
	hello_path(&path, backend);
	last = json_load_file(path.buf, 0, NULL);
	strbuf_release(&path);
	if (json_is_true(json_object_get(last, "ok"))) {
		j->device = last;
		return 0;
	}
	json_decref(last);
	return judge_ready(j);
}

int judge_ready(struct judge *j)
{
	struct strbuf why = STRBUF_INIT, path = STRBUF_INIT;
	struct strbuf was = STRBUF_INIT, now = STRBUF_INIT;
	const char *name;
	long long t0;
	char *text;
	int rc, changed;

	if (!j->pending)
		return j->started ? 0 : AK_EENV;
	j->pending = 0;
	t0 = now_ns();
	rc = runner_hello(&j->r, &why);
	j->waited += (now_ns() - t0) / 1e9;
	trace("judge", "runner said hello after %.2f ms of waiting",
	      ms_since(t0));
	if (rc < 0) {
		error("no %s device: %s", j->backend, why.buf);
		strbuf_release(&why);
		runner_stop(&j->r);
		j->started = 0;
		return AK_EENV;
	}
	strbuf_release(&why);
	/* ceilings read under the last hello's device belong to another
	 * device if the name or the id changed: read them again */
	name = json_string_value(json_object_get(j->r.hello, "name"));
	device_id(j, &was);
	changed = strcmp(judge_device_name(j), name ? name : "unknown device");
	json_decref(j->device);
	j->device = json_incref(j->r.hello);
	device_id(j, &now);
	if (changed || strcmp(was.buf, now.buf)) {
		json_decref(j->ceilings);
		j->ceilings = NULL;
	}
	strbuf_release(&was);
	strbuf_release(&now);
	hello_path(&path, j->backend);
	text = json_dumps(j->device, JSON_INDENT(2) | JSON_SORT_KEYS);
	if (text && mkdir_p(ak_cachedir()) == 0)
		write_file_atomic(path.buf, text, strlen(text));
	free(text);
	strbuf_release(&path);
	return 0;
}

void judge_stop(struct judge *j)
{
	if (j->started)
		runner_stop(&j->r);
	j->started = 0;
	json_decref(j->device);
	json_decref(j->ceilings);
	j->device = j->ceilings = NULL;
}

/* The compiler's output as the user reads it: the kernel named by its
 * path in the repository, not by where the judge built it; and only
 * what is about the kernel's own files (cell.h), whatever the compiler
 * read: a kernel that includes ~/.ssh/id_rsa gets no line of it into a
 * verdict, a note or a prompt. */
static void compiler_output(struct strbuf *verdict, struct strbuf *log,
			    const struct candidate *c)
{
	struct strbuf rel = STRBUF_INIT, kept = STRBUF_INIT;

	strbuf_addf(&rel, "%s/%s", c->name, c->p.kernel);
	cell_diagnostics(&kept, log->buf, c->src, c->dir);
	strbuf_replace(&kept, c->src, rel.buf);
	strbuf_addbuf(verdict, &kept);
	strbuf_trim(verdict);
	strbuf_release(&rel);
	strbuf_release(&kept);
}

int judge_build(struct judge *j, struct candidate *c, int slot,
		struct strbuf *verdict)
{
	struct strbuf so = STRBUF_INIT, log = STRBUF_INIT, why = STRBUF_INIT;
	struct strbuf status = STRBUF_INIT;
	const char *arch = json_string_value(json_object_get(j->device, "arch"));
	char *conf = NULL, used[64];
	long long t0;
	int cached, r, ret = 0;

	if (!strcmp(c->p.backend, "host") || !strcmp(c->p.backend, "triton"))
		arch = NULL;
	else if ((conf = config_string(!strcmp(c->p.backend, "hip") ?
				       "autokernel.hip.arch" :
				       "autokernel.cuda.arch", NULL)))
		arch = conf;
	snprintf(used, sizeof(used), "%s", arch ? arch : "");
	t0 = now_ns();
	r = build_kernel(&so, &log, &status, c->p.backend, c->src, arch,
			 5 * 60 * 1000, &cached);
	trace("judge", "%s: %s in %.2f ms", c->src, cached ? "cached build" :
	      "built", ms_since(t0));
	/* A kernel to load needs the runner's hello.  If the build was for
	 * the last hello's device and the runner found another, build (or
	 * fail to build) again for the one it found. */
	if (r != -2 && slot >= 0) {
		int was_pending = j->pending;

		if (judge_ready(j)) {
			ret = AK_EENV;
			goto cleanup;
		}
		arch = json_string_value(json_object_get(j->device, "arch"));
		if (was_pending && !conf && strcmp(c->p.backend, "host") &&
		    strcmp(used, arch ? arch : "")) {
			free(conf);
			strbuf_release(&so);
			strbuf_release(&log);
			strbuf_release(&status);
			return judge_build(j, c, slot, verdict);
		}
	}
	if (r == -2) {
		error("%s toolchain missing: %s", c->p.backend, log.buf);
		ret = AK_EENV;
	} else if (r < 0) {
		strbuf_addf(verdict, "unable to build '%s/%s': %s\n", c->name,
			    c->p.kernel, status.buf);
		compiler_output(verdict, &log, c);
		ret = -1;
	} else if (slot >= 0 && runner_load(&j->r, slot, so.buf, &why) < 0) {
		strbuf_addf(verdict, "unable to load '%s/%s': %s", c->name,
			    c->p.kernel, why.buf);
		ret = -1;
	} else if (slot >= 0 && !strcmp(c->p.backend, "triton") &&
		   runner_warm(&j->r, slot, &c->p, &why) < 0) {
		/* Triton's JIT compile is the build */
		strbuf_addf(verdict, "unable to build '%s/%s': %s", c->name,
			    c->p.kernel, why.buf);
		ret = -1;
	} else {
		free(c->so);
		c->so = strbuf_detach(&so, NULL);
		c->cached = cached;
	}
cleanup:
	free(conf);
	strbuf_release(&so);
	strbuf_release(&log);
	strbuf_release(&why);
	strbuf_release(&status);
	return ret;
}

const char *judge_device_name(struct judge *j)
{
	const char *n = json_string_value(json_object_get(j->device, "name"));

	return n ? n : "unknown device";
}

/* The ceilings of the device: device-<backend>-<name>[-<id>].json in the
 * repository (shared by its worktrees) or the user's cache; with
 * per_device 0, the file of the device's kind, which `profile` reads for
 * a trace that names the device by name alone. */
static void device_file(struct judge *j, struct strbuf *path, int per_device)
{
	struct strbuf id = STRBUF_INIT;

	if (repo_get() && !git_repository_is_bare(repo_get()))
		strbuf_addf(path, "%s/device-", repo_shared_dir());
	else
		strbuf_addf(path, "%s/device-", ak_cachedir());
	strbuf_addf(path, "%s-", j->backend);
	add_sanitized(path, judge_device_name(j));
	if (per_device)
		device_id(j, &id);
	if (id.len)
		strbuf_addf(path, "-%s", id.buf);
	strbuf_addstr(path, ".json");
	strbuf_release(&id);
}

static void save_ceilings(struct judge *j, json_t *res)
{
	struct strbuf path = STRBUF_INIT;
	char *text = json_dumps(res, JSON_INDENT(2) | JSON_SORT_KEYS);

	device_file(j, &path, 1);
	write_file_atomic(path.buf, text, strlen(text));
	strbuf_reset(&path);
	device_file(j, &path, 0);
	if (access(path.buf, F_OK))
		write_file_atomic(path.buf, text, strlen(text));
	free(text);
	strbuf_release(&path);
}

/* The runner measures the ceilings: a benchmark, so with the device. */
static json_t *measure_ceilings(struct judge *j, struct strbuf *why)
{
	struct devlock l = DEVLOCK_INIT;
	json_t *req = json_pack("{s:s}", "req", "ceilings"), *res;

	devlock_take(&l, j, DEVLOCK_EXCLUSIVE);
	j->device_wait += l.waited;
	res = runner_request(&j->r, req, 300000, why);
	devlock_release(&l);
	json_decref(req);
	return res;
}

json_t *judge_ceilings(struct judge *j, int remeasure)
{
	struct strbuf path = STRBUF_INIT, why = STRBUF_INIT;
	json_t *res;

	if (j->ceilings && !remeasure)
		return j->ceilings;
	device_file(j, &path, 1);
	if (!remeasure) {
		j->ceilings = json_load_file(path.buf, 0, NULL);
		if (j->ceilings)
			goto done;
	}
	/* measured for the device the runner found, filed under its name */
	if (judge_ready(j))
		goto done;
	strbuf_reset(&path);
	device_file(j, &path, 1);
	if (!remeasure && (j->ceilings = json_load_file(path.buf, 0, NULL)))
		goto done;
	res = measure_ceilings(j, &why);
	if (!res || !json_is_true(json_object_get(res, "ok"))) {
		warning("unable to measure the device's ceilings: %s",
			res ? json_string_value(json_object_get(res, "error")) :
			why.buf);
		json_decref(res);
		goto done;
	}
	json_object_del(res, "ok");
	json_object_set(res, "device", j->device);
	json_decref(j->ceilings);
	j->ceilings = res;
	save_ceilings(j, res);
done:
	strbuf_release(&path);
	strbuf_release(&why);
	return j->ceilings;
}

struct stage_lock {
	struct judge *j;
	struct devlock l;
	int unlocked;   /* the lock could not be made: warned once */
};

static void stage_call_enter(void *arg)
{
	struct stage_lock *s = arg;

	if (s->unlocked)
		return;
	s->unlocked = devlock_take(&s->l, s->j, DEVLOCK_SHARED) < 0;
	s->j->device_wait += s->l.waited;
}

static void stage_call_leave(void *arg)
{
	devlock_release(&((struct stage_lock *)arg)->l);
}

int judge_run_stages(struct judge *j, const struct problem *p,
		     struct cases *cs, int slot, json_t **result,
		     struct strbuf *verdict, FILE *progress)
{
	struct stage_lock s = { j, DEVLOCK_INIT, 0 };
	struct device_use dev = { stage_call_enter, stage_call_leave, &s };

	return verify_stages(&j->r, p, cs, slot, &dev, result, verdict,
			     progress);
}

int judge_run_bench(struct judge *j, const struct problem *p,
		    const int *slots, int n, double scale,
		    const struct settle *settle, json_t **result,
		    struct strbuf *verdict)
{
	struct devlock l = DEVLOCK_INIT;
	json_t *ceilings = judge_ceilings(j, 0);
	int rc;

	devlock_take(&l, j, DEVLOCK_EXCLUSIVE);
	j->device_wait += l.waited;
	rc = bench_workload(&j->r, p, slots, n, ceilings, scale, settle,
			    result, verdict);
	devlock_release(&l);
	return rc;
}

int judge_run_bench_shape(struct judge *j, const struct problem *p,
			  const struct shape *s, enum ak_dtype dt,
			  const int *slots, int n, json_t **result,
			  struct strbuf *verdict)
{
	struct devlock l = DEVLOCK_INIT;
	json_t *ceilings = judge_ceilings(j, 0);
	int rc;

	devlock_take(&l, j, DEVLOCK_EXCLUSIVE);
	j->device_wait += l.waited;
	rc = bench_fresh(&j->r, p, s, dt, slots, n, ceilings, 1.0, NULL,
			 result, verdict);
	devlock_release(&l);
	return rc;
}
