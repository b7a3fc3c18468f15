#include <ctype.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <jansson.h>
#include "backends/build.h"
#include "export/export.h"
#include "lib/paths.h"
#include "ops/problem.h"
#include "lib/records.h"
#include "lib/repo.h"
#include "lib/result.h"
#include "lib/tempdir.h"

#define BRANCHES "refs/heads/autokernel/"
#define BUILD_TIMEOUT_MS (5 * 60 * 1000)

/* The name as an operator's: [A-Za-z0-9_], not starting with a digit. */
static void set_torch_name(struct export_kernel *k)
{
	struct strbuf sb = STRBUF_INIT;

	if (isdigit((unsigned char)k->name[0]))
		strbuf_addstr(&sb, "k_");
	for (const char *p = k->name; *p; p++)
		strbuf_addch(&sb, isalnum((unsigned char)*p) ? *p : '_');
	snprintf(k->torch_name, sizeof(k->torch_name), "%s", sb.buf);
	strbuf_release(&sb);
}

static struct export_kernel *add_kernel(struct export *ex)
{
	ALLOC_GROW(ex->k, ex->nr + 1, ex->alloc);
	memset(&ex->k[ex->nr], 0, sizeof(ex->k[0]));
	return &ex->k[ex->nr++];
}

static int named_twice(const struct export *ex, const char *name)
{
	for (size_t i = 0; i + 1 < ex->nr; i++)
		if (!strcmp(ex->k[i].name, name))
			return error("'%s' is named twice", name);
	return 0;
}

static int has_problem(const git_oid *commit, const char *name)
{
	struct strbuf text = STRBUF_INIT, path = STRBUF_INIT;
	char hex[GIT_OID_HEXSZ + 1];
	int r;

	git_oid_tostr(hex, sizeof(hex), commit);
	strbuf_addf(&path, "%s/problem.json", name);
	r = repo_read_file(&text, hex, path.buf);
	strbuf_release(&text);
	strbuf_release(&path);
	return r == 0;
}

/* The experiment a commit that is not on its branch holds: its one
 * top-level <name>/problem.json. */
static int experiment_of(struct export_kernel *k, const char *rev)
{
	git_commit *c = NULL;
	git_tree *tree = NULL;
	int found = 0, ret = 0;

	if (git_commit_lookup(&c, repo_need(), &k->tip) < 0 ||
	    git_commit_tree(&tree, c) < 0) {
		ret = error("unable to read '%s': %s", rev, repo_error());
		goto cleanup;
	}
	for (size_t i = 0; i < git_tree_entrycount(tree); i++) {
		const git_tree_entry *e = git_tree_entry_byindex(tree, i);

		if (git_tree_entry_type(e) == GIT_OBJECT_TREE &&
		    has_problem(&k->tip, git_tree_entry_name(e))) {
			found++;
			snprintf(k->name, sizeof(k->name), "%s",
				 git_tree_entry_name(e));
		}
	}
	if (found != 1) {
		error("'%s' holds %s experiment: name its branch", rev,
		      found ? "more than one" : "no");
		ret = AK_EUSAGE;
	}
cleanup:
	git_tree_free(tree);
	git_commit_free(c);
	return ret;
}

/* rev: a branch autokernel/<name>, an experiment's <name>, or a commit. */
static int add_rev(struct export *ex, const char *rev)
{
	git_object *obj = NULL, *commit = NULL;
	git_reference *ref = NULL;
	struct strbuf full = STRBUF_INIT;
	struct export_kernel *k = add_kernel(ex);
	int ret = 0;

	strbuf_addf(&full, "%s%s", BRANCHES, rev);
	if ((git_revparse_ext(&obj, &ref, repo_need(), rev) < 0 &&
	     git_revparse_ext(&obj, &ref, repo_need(), full.buf) < 0) ||
	    git_object_peel(&commit, obj, GIT_OBJECT_COMMIT) < 0) {
		error("'%s' is neither a commit nor an experiment's name", rev);
		ret = AK_EUSAGE;
		goto cleanup;
	}
	k->tip = *git_object_id(commit);
	snprintf(k->label, sizeof(k->label), "%s", rev);
	if (ref && starts_with(git_reference_name(ref), BRANCHES)) {
		snprintf(k->name, sizeof(k->name), "%s",
			 git_reference_name(ref) + strlen(BRANCHES));
		snprintf(k->label, sizeof(k->label), "%s",
			 git_reference_shorthand(ref));
	} else {
		ret = experiment_of(k, rev);
	}
	if (!ret)
		ret = named_twice(ex, k->name) ? AK_EUSAGE : 0;
cleanup:
	if (ret)
		ex->nr--;
	git_object_free(commit);
	git_object_free(obj);
	git_reference_free(ref);
	strbuf_release(&full);
	return ret;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(((const struct export_kernel *)a)->name,
		      ((const struct export_kernel *)b)->name);
}

static int add_branches(struct export *ex)
{
	git_reference_iterator *it = NULL;
	git_reference *ref;

	if (git_reference_iterator_glob_new(&it, repo_need(),
					    BRANCHES "*") < 0)
		return error("unable to list branches: %s", repo_error());
	while (git_reference_next(&ref, it) == 0) {
		const git_oid *id = git_reference_target(ref);

		if (id) {
			struct export_kernel *k = add_kernel(ex);

			k->tip = *id;
			snprintf(k->name, sizeof(k->name), "%s",
				 git_reference_name(ref) + strlen(BRANCHES));
			snprintf(k->label, sizeof(k->label), "%s",
				 git_reference_shorthand(ref));
		}
		git_reference_free(ref);
	}
	git_reference_iterator_free(it);
	if (!ex->nr)
		return error("no autokernel/* branches to export");
	qsort(ex->k, ex->nr, sizeof(*ex->k), by_name);
	return 0;
}

/* Whether commit's note says it was verified and kept. */
static int is_verified(const git_oid *commit)
{
	json_t *note = note_read(commit);
	struct result r;
	int ok;

	result_from_note(&r, note);
	ok = r.status && (!strcmp(r.status, "kept") ||
			  !strcmp(r.status, "baseline")) && r.verify_pass == 1;
	result_release(&r);
	json_decref(note);
	return ok;
}

static void warn_unverified(const struct export_kernel *k)
{
	char tip[GIT_OID_HEXSZ + 1], commit[GIT_OID_HEXSZ + 1];

	git_oid_tostr(tip, sizeof(tip), &k->tip);
	git_oid_tostr(commit, sizeof(commit), &k->commit);
	warning("%s: the tip %.7s is unverified (no note); exporting %.7s, its "
		"newest verified kept commit", k->label, tip, commit);
}

/* k->commit: the newest commit from the tip down to the baseline whose
 * note says it was verified and kept. */
static int newest_verified(struct export_kernel *k)
{
	git_oid cur = k->tip;

	while (has_problem(&cur, k->name)) {
		if (is_verified(&cur)) {
			k->commit = cur;
			if (!git_oid_equal(&cur, &k->tip))
				warn_unverified(k);
			return 0;
		}
		if (repo_first_parent(&cur, &cur))
			break;
	}
	return error("%s: no verified kept commit of '%s' from %.7s down to "
		     "its baseline", k->label, k->name,
		     git_oid_tostr_s(&k->tip));
}

static int copy_file(const char *from, const char *to)
{
	struct strbuf sb = STRBUF_INIT;
	int ret;

	if (strbuf_read_file(&sb, from) < 0)
		ret = error_errno("unable to read '%s'", from);
	else
		ret = write_file_atomic(to, sb.buf, sb.len);
	strbuf_release(&sb);
	return ret;
}

/* Every header a kernel may include (the ABI's, the optional helpers'),
 * for a rebuild: into DIR/include/. */
static int write_headers(const char *dir)
{
	struct strbuf from = STRBUF_INIT, to = STRBUF_INIT;
	struct strvec headers = STRVEC_INIT;
	int ret;

	strbuf_addf(&from, "%s/include", ak_datadir());
	strbuf_addf(&to, "%s/include", dir);
	ret = kernel_headers(&headers, from.buf);
	if (!ret)
		ret = mkdir_p(to.buf);
	for (size_t i = 0; !ret && i < headers.nr; i++) {
		strbuf_reset(&from);
		strbuf_reset(&to);
		strbuf_addf(&from, "%s/include/%s", ak_datadir(),
			    headers.v[i]);
		strbuf_addf(&to, "%s/include/%s", dir, headers.v[i]);
		ret = copy_file(from.buf, to.buf);
	}
	strvec_clear(&headers);
	strbuf_release(&from);
	strbuf_release(&to);
	return ret;
}

/* The package's code (the .py files of python/autokernel_ops) and the
 * headers. */
static int write_template(const char *dir)
{
	struct strbuf from = STRBUF_INIT, to = STRBUF_INIT;
	struct dirent *de;
	DIR *d;
	int ret = 0;

	strbuf_addf(&from, "%s/python/autokernel_ops", ak_datadir());
	if (!(d = opendir(from.buf))) {
		ret = error_errno("no package template at '%s'", from.buf);
		goto cleanup;
	}
	while (!ret && (de = readdir(d))) {
		if (!ends_with(de->d_name, ".py"))
			continue;
		strbuf_reset(&from);
		strbuf_reset(&to);
		strbuf_addf(&from, "%s/python/autokernel_ops/%s", ak_datadir(),
			    de->d_name);
		strbuf_addf(&to, "%s/%s", dir, de->d_name);
		ret = copy_file(from.buf, to.buf);
	}
	closedir(d);
	if (!ret)
		ret = write_headers(dir);
cleanup:
	strbuf_release(&from);
	strbuf_release(&to);
	return ret;
}

/* <name>/<file> of the exported commit into text and the package. */
static int export_blob(struct strbuf *text, const char *dir,
		       const struct export_kernel *k, const char *file)
{
	struct strbuf path = STRBUF_INIT;
	char hex[GIT_OID_HEXSZ + 1];
	int r;

	git_oid_tostr(hex, sizeof(hex), &k->commit);
	strbuf_addf(&path, "%s/%s", k->name, file);
	r = repo_read_file(text, hex, path.buf);
	if (r == 1)
		error("'%s' is not in %.7s", path.buf, hex);
	strbuf_reset(&path);
	strbuf_addf(&path, "%s/kernels/%s/%s", dir, k->name, file);
	if (!r)
		r = write_file_atomic(path.buf, text->buf, text->len);
	strbuf_release(&path);
	return r ? -1 : 0;
}

static json_t *strvec_json(const struct strvec *sv)
{
	json_t *a = json_array();

	for (size_t i = 0; i < sv->nr; i++)
		json_array_append_new(a, json_string(sv->v[i]));
	return a;
}

/* The command, run from the package's directory, that built obj. */
static json_t *build_json(const struct problem *p, const char *arch,
			  const char *src, const char *obj)
{
	struct build_command cmd = BUILD_COMMAND_INIT;
	struct strbuf line = STRBUF_INIT;
	json_t *j;

	build_command(&cmd, p->backend, arch);
	strbuf_addstr(&line, cmd.compiler);
	for (size_t i = 0; i < cmd.flags.nr; i++)
		strbuf_addf(&line, " %s", cmd.flags.v[i]);
	for (size_t i = 0; i < cmd.arch.nr; i++)
		strbuf_addf(&line, " %s", cmd.arch.v[i]);
	strbuf_addf(&line, " -Iinclude -o %s %s", obj, src);
	for (size_t i = 0; i < cmd.libs.nr; i++)
		strbuf_addf(&line, " %s", cmd.libs.v[i]);
	j = json_pack("{s:s, s:s, s:s, s:o, s:o, s:o, s:o}",
		      "command", line.buf, "compiler", cmd.compiler,
		      "version", cmd.version.buf,
		      "flags", strvec_json(&cmd.flags),
		      "arch", arch ? json_string(arch) : json_null(),
		      "arch_flags", strvec_json(&cmd.arch),
		      "libs", strvec_json(&cmd.libs));
	build_command_release(&cmd);
	strbuf_release(&line);
	return j;
}

/* Builds <rel>/<kernel> for the note's device into <rel>/<arch>.so;
 * files.object is its path in the package, or null (with a warning) when
 * it cannot be built here. */
static json_t *build_object(json_t *files, const char *dir,
			    const struct problem *p, const struct result *res)
{
	struct strbuf so = STRBUF_INIT, log = STRBUF_INIT, status = STRBUF_INIT;
	struct strbuf src = STRBUF_INIT, obj = STRBUF_INIT, to = STRBUF_INIT;
	const char *rel = json_string_value(json_object_get(files, "source"));
	const char *arch = res->device_arch;
	const char *for_arch = strcmp(p->backend, "host") ? arch : NULL;
	int cached, r;
	json_t *j;

	strbuf_addf(&src, "%s/%s", dir, rel);
	strbuf_add(&obj, rel, strrchr(rel, '/') - rel);
	strbuf_addf(&obj, "/%s.so", arch ? arch : "kernel");
	strbuf_addf(&to, "%s/%s", dir, obj.buf);
	r = build_kernel(&so, &log, &status, p->backend, src.buf, for_arch,
			 BUILD_TIMEOUT_MS, &cached);
	if (!r)
		r = copy_file(so.buf, to.buf);
	else
		warning("unable to build '%s' for %s here (%s); the package "
			"builds it where it is imported", rel,
			arch ? arch : p->backend,
			r == -2 ? log.buf : status.buf);
	json_object_set_new(files, "object", r ? json_null() :
			    json_string(obj.buf));
	j = build_json(p, for_arch, rel, obj.buf);
	strbuf_release(&so);
	strbuf_release(&log);
	strbuf_release(&status);
	strbuf_release(&src);
	strbuf_release(&obj);
	strbuf_release(&to);
	return j;
}

/* The verified shapes: problem.json's, and its workload's if it has one. */
static json_t *shapes_json(json_t *norm, json_t *raw, const struct op *op)
{
	json_t *s = json_pack("{s:O, s:O, s:O, s:O}",
			      "smoke", json_object_get(norm, "smoke_shape"),
			      "test", json_object_get(norm, "test_shapes"),
			      "edge", json_object_get(norm, "edge_shapes"),
			      "bench", json_object_get(norm, "bench_shape"));
	json_t *w = json_object_get(raw, "workload"), *v, *list;
	struct shape sh;
	char err[256];
	size_t i;

	if (!json_is_array(w))
		return s;
	list = json_array();
	json_array_foreach(w, i, v) {
		const char *text = json_string_value(json_is_object(v) ?
			json_object_get(v, "shape") : v);

		if (text && !shape_parse(&sh, op, text, err, sizeof(err)))
			json_array_append_new(list, json_string(text));
	}
	json_object_set_new(s, "workload", list);
	return s;
}

/* A figure of the note as it wrote it, null when it has none. */
static json_t *figure_or_null(const struct result *r, const char *key)
{
	json_t *v = result_figure(r, key);

	return v ? v : json_null();
}

/* A key of the note's verify object as it wrote it, null when absent. */
static json_t *verify_or_null(const struct result *r, const char *key)
{
	json_t *v = json_object_get(json_object_get(r->note, "verify"), key);

	return v ? json_incref(v) : json_null();
}

static json_t *note_facts(const struct result *r)
{
	return json_pack("{s:s?, s:o, s:o, s:{s:o, s:o}}", "status", r->status,
			 "time_us", figure_or_null(r, "time_us"),
			 "speedup", figure_or_null(r, "speedup"),
			 "verify", "pass", verify_or_null(r, "pass"),
			 "stages_passed", verify_or_null(r, "stages_passed"));
}

/* The manifest's entry of a kernel, from its problem.json (raw, and
 * normalized by problem_dump()) and its note. */
static json_t *kernel_json(const struct export_kernel *k,
			   const struct problem *p, json_t *raw,
			   const struct result *res)
{
	char *text = problem_dump(p);
	json_t *norm = json_loads(text, 0, NULL), *facts;
	json_t *j = json_pack("{s:s, s:s, s:s, s:O, s:o, s:O, s:O}",
			      "name", k->name, "op", p->op->name,
			      "backend", p->backend,
			      "dtypes", json_object_get(norm, "dtypes"),
			      "shapes", shapes_json(norm, raw, p->op),
			      "tolerances", json_object_get(norm, "tolerances"),
			      "scalars", json_object_get(norm, "scalars"));

	json_object_set_new(j, "torch_name", json_string(k->torch_name));
	json_object_set_new(j, "commit",
			    json_string(git_oid_tostr_s(&k->commit)));
	json_object_set_new(j, "branch", json_string(k->label));
	json_object_set_new(j, "tip", json_string(git_oid_tostr_s(&k->tip)));
	json_object_set_new(j, "device", res->device ?
			    json_incref(res->device) : json_null());
	facts = note_facts(res);
	json_object_update(j, facts);
	json_decref(facts);
	free(text);
	json_decref(norm);
	return j;
}

static int write_kernel(json_t *list, const char *dir,
			const struct export_kernel *k)
{
	struct strbuf text = STRBUF_INIT, path = STRBUF_INIT;
	json_t *note = note_read(&k->commit), *raw = NULL, *j = NULL, *files;
	struct result res;
	struct problem p;
	int ret = -1;

	result_from_note(&res, note);   /* res holds the note */
	json_decref(note);
	strbuf_addf(&path, "%s/kernels/%s", dir, k->name);
	if (mkdir_p(path.buf) < 0 ||
	    export_blob(&text, dir, k, "problem.json") < 0 ||
	    problem_parse(&p, text.buf, "problem.json") < 0)
		goto cleanup;
	raw = json_loads(text.buf, 0, NULL);
	strbuf_reset(&text);
	if (export_blob(&text, dir, k, p.kernel) < 0)
		goto cleanup;
	j = kernel_json(k, &p, raw, &res);
	files = json_object();
	strbuf_reset(&path);
	strbuf_addf(&path, "kernels/%s/problem.json", k->name);
	json_object_set_new(files, "problem", json_string(path.buf));
	strbuf_reset(&path);
	strbuf_addf(&path, "kernels/%s/%s", k->name, p.kernel);
	json_object_set_new(files, "source", json_string(path.buf));
	json_object_set_new(j, "build", build_object(files, dir, &p, &res));
	json_object_set_new(j, "files", files);
	json_array_append(list, j);
	ret = 0;
cleanup:
	json_decref(j);
	json_decref(raw);
	result_release(&res);
	strbuf_release(&text);
	strbuf_release(&path);
	return ret;
}

static int write_manifest(const char *dir, json_t *kernels)
{
	json_t *m = json_pack("{s:i, s:i, s:s, s:O}", "version", 1,
			      "abi", AK_ABI_VERSION, "tool", AK_VERSION,
			      "kernels", kernels);
	char *text = json_dumps(m, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	struct strbuf path = STRBUF_INIT;
	int ret;

	strbuf_addf(&path, "%s/manifest.json", dir);
	ret = write_file_atomic(path.buf, text, strlen(text));
	free(text);
	json_decref(m);
	strbuf_release(&path);
	return ret;
}

/* DIR may be absent, empty, or an earlier export. */
static int check_target(const char *dir)
{
	struct strbuf path = STRBUF_INIT;
	struct dirent *de;
	struct stat st;
	int others = 0;
	DIR *d;

	if (stat(dir, &st) < 0)
		return 0;
	strbuf_addf(&path, "%s/manifest.json", dir);
	if (S_ISDIR(st.st_mode) && !access(path.buf, F_OK)) {
		strbuf_release(&path);
		return 0;
	}
	strbuf_release(&path);
	if (!S_ISDIR(st.st_mode) || !(d = opendir(dir)))
		return error("'%s' is not a directory", dir);
	while ((de = readdir(d)))
		others += strcmp(de->d_name, ".") && strcmp(de->d_name, "..");
	closedir(d);
	if (others)
		return error("'%s' holds files but no export (no "
			     "manifest.json): choose another -o", dir);
	return 0;
}

/* A fresh directory beside dir, to be renamed to it. */
static char *beside(const char *dir)
{
	struct strbuf parent = STRBUF_INIT;
	const char *slash = strrchr(dir, '/');
	char *tmp = NULL;

	if (slash)
		strbuf_add(&parent, dir, slash == dir ? 1 : slash - dir);
	else
		strbuf_addch(&parent, '.');
	if (!mkdir_p(parent.buf))
		tmp = tempdir_make(parent.buf);
	strbuf_release(&parent);
	return tmp;
}

static int write_package(const struct export *ex, const char *dir)
{
	json_t *list = json_array();
	char *tmp = NULL;
	int ret = -1;

	if (check_target(dir) < 0 || !(tmp = beside(dir)) ||
	    write_template(tmp) < 0)
		goto cleanup;
	for (size_t i = 0; i < ex->nr; i++)
		if (write_kernel(list, tmp, &ex->k[i]) < 0)
			goto cleanup;
	if (write_manifest(tmp, list) < 0 || remove_tree(dir) < 0)
		goto cleanup;
	if (rename(tmp, dir) < 0) {
		error_errno("unable to rename '%s' to '%s'", tmp, dir);
		goto cleanup;
	}
	ret = 0;
cleanup:
	tempdir_remove(tmp);
	free(tmp);
	json_decref(list);
	return ret;
}

int export_package(struct export *ex, const char *dir,
		   const char *const *revs, int nrevs)
{
	int ret = 0;

	for (int i = 0; !ret && i < nrevs; i++)
		ret = add_rev(ex, revs[i]);
	if (!ret && !nrevs)
		ret = add_branches(ex);
	for (size_t i = 0; !ret && i < ex->nr; i++) {
		set_torch_name(&ex->k[i]);
		ret = newest_verified(&ex->k[i]);
	}
	return ret ? ret : write_package(ex, dir);
}

int export_read(struct export *ex, const char *dir)
{
	struct strbuf path = STRBUF_INIT;
	json_error_t jerr;
	json_t *m, *v;
	size_t i;
	int ret = 0;

	strbuf_addf(&path, "%s/manifest.json", dir);
	if (!(m = json_load_file(path.buf, 0, &jerr))) {
		ret = error("unable to read '%s': %s", path.buf, jerr.text);
		goto cleanup;
	}
	json_array_foreach(json_object_get(m, "kernels"), i, v) {
		struct export_kernel *k = add_kernel(ex);
		const char *name, *label;

		name = json_string_value(json_object_get(v, "name"));
		label = json_string_value(json_object_get(v, "branch"));

		snprintf(k->name, sizeof(k->name), "%s", name ? name : "");
		set_torch_name(k);
		snprintf(k->label, sizeof(k->label), "%s", label ? label : "");
		if (!name || git_oid_fromstr(&k->commit, json_string_value(
			json_object_get(v, "commit"))) < 0) {
			ret = error("'%s': kernel %zu has no name or commit",
				    path.buf, i);
			break;
		}
		k->tip = k->commit;
	}
cleanup:
	json_decref(m);
	strbuf_release(&path);
	return ret;
}

void export_release(struct export *ex)
{
	free(ex->k);
	ex->k = NULL;
	ex->nr = ex->alloc = 0;
}
