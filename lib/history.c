#include <stdlib.h>
#include <string.h>
#include "lib/history.h"
#include "lib/records.h"
#include "lib/repo.h"

int history_tree_has(git_tree *tree, const char *path)
{
	git_tree_entry *e = NULL;
	int has = tree && git_tree_entry_bypath(&e, tree, path) == 0;

	git_tree_entry_free(e);
	return has;
}

int history_baseline(git_oid *out, const char *name, const git_oid *head)
{
	struct strbuf path = STRBUF_INIT;
	git_commit *c = NULL, *parent = NULL;
	int ret = -1;

	strbuf_addf(&path, "%s/problem.json", name);
	if (git_commit_lookup(&c, repo_need(), head) < 0)
		goto cleanup;
	for (;;) {
		git_tree *pt = NULL;
		int parent_has;

		if (git_commit_parentcount(c) == 0 ||
		    git_commit_parent(&parent, c, 0) < 0) {
			*out = *git_commit_id(c);
			ret = 0;
			break;
		}
		git_commit_tree(&pt, parent);
		parent_has = history_tree_has(pt, path.buf);
		git_tree_free(pt);
		if (!parent_has) {
			*out = *git_commit_id(c);
			git_commit_free(parent);
			ret = 0;
			break;
		}
		git_commit_free(c);
		c = parent;
		parent = NULL;
	}
cleanup:
	git_commit_free(c);
	strbuf_release(&path);
	return ret;
}

static void set_status(struct experiment *e, int first)
{
	const char *s = e->result.status;

	if (e->attempt)
		e->status = "rejected";
	else if (!e->result.note)
		e->status = "unverified";
	else if (e->from_trailers)
		e->status = first ? "baseline" : "kept";
	else
		e->status = s ? s : "kept";
}

/* Appends the commit id (an attempt when a is not NULL); 0 or -1. */
static int add(struct history *h, const git_oid *id, const struct attempt *a)
{
	git_commit *c = NULL;
	struct experiment *e;
	const char *summary;
	json_t *note;

	if (git_commit_lookup(&c, repo_need(), id) < 0)
		return -1;
	ALLOC_GROW(h->e, h->nr + 1, h->alloc);
	e = &h->e[h->nr++];
	memset(e, 0, sizeof(*e));
	e->id = *id;
	summary = git_commit_summary(c);
	e->subject = xstrdup(summary ? summary : "");
	e->message = xstrdup(git_commit_message(c));
	e->when = (long long)git_commit_time(c);
	note = note_read(id);
	if (!note) {
		note = note_from_trailers(e->message);
		e->from_trailers = note != NULL;
		h->from_trailers += e->from_trailers;
	}
	result_from_note(&e->result, note);
	json_decref(note);
	if (a) {
		e->attempt = a->n;
		e->ref = xstrdup(a->ref);
		snprintf(e->label, sizeof(e->label), "%s%s%d", a->remote,
			 *a->remote ? "/" : "", a->n);
	}
	set_status(e, h->nr == 1);
	git_commit_free(c);
	return 0;
}

/* Kept commits, newest first, from HEAD down to the baseline. */
static int walk_kept(git_oid **out, size_t *nr, const char *name)
{
	git_oid head, base, cur;
	size_t alloc = 0;

	*out = NULL;
	*nr = 0;
	if (repo_head(&head))
		return error("no commits on this branch");
	if (history_baseline(&base, name, &head) < 0)
		return error("no baseline of '%s' in this branch's history "
			     "(no %s/problem.json)", name, name);
	cur = head;
	for (;;) {
		ALLOC_GROW(*out, *nr + 1, alloc);
		(*out)[(*nr)++] = cur;
		if (git_oid_equal(&cur, &base) || repo_first_parent(&cur, &cur))
			break;
	}
	return 0;
}

/* An attempt and the commit it was tried on. */
struct tried {
	const struct attempt *a;
	git_commit *parent;
	int on_branch;          /* its parent is one of the kept commits */
	int used;
};

static int same_author(const git_commit *x, const git_commit *y)
{
	const git_signature *a = git_commit_author(x);
	const git_signature *b = git_commit_author(y);

	return a->when.time == b->when.time && !strcmp(a->email, b->email) &&
		!strcmp(git_commit_message(x), git_commit_message(y));
}

/* Whether old, a commit no longer on the branch, became k: k's note
 * (copied by the rewrite) names old's tree, or k has old's author and
 * message. */
static int rewritten_as(const git_commit *old, const struct experiment *k)
{
	const char *tree = k->result.tree;
	git_commit *c = NULL;
	int same;

	if (tree && !k->from_trailers &&
	    !strcmp(tree, git_oid_tostr_s(git_commit_tree_id(old))))
		return 1;
	if (git_commit_lookup(&c, repo_need(), &k->id) < 0)
		return 0;
	same = same_author(old, c);
	git_commit_free(c);
	return same;
}

static int tried_on(const struct tried *t, const struct experiment *k)
{
	if (!t->parent || t->used)
		return 0;
	if (git_oid_equal(git_commit_id(t->parent), &k->id))
		return 1;
	return !t->on_branch && rewritten_as(t->parent, k);
}

static struct tried *tried_list(const struct attempt *att, int na,
				const git_oid *kept, size_t nk)
{
	struct tried *t = xcalloc(na ? na : 1, sizeof(*t));

	for (int a = 0; a < na; a++) {
		git_commit *c = NULL;

		t[a].a = &att[a];
		if (git_commit_lookup(&c, repo_need(), &att[a].id) < 0 ||
		    git_commit_parent(&t[a].parent, c, 0) < 0)
			t[a].parent = NULL;
		for (size_t k = 0; t[a].parent && k < nk; k++)
			if (git_oid_equal(git_commit_id(t[a].parent), &kept[k]))
				t[a].on_branch = 1;
		git_commit_free(c);
	}
	return t;
}

static int cmp_when(const void *x, const void *y)
{
	const struct experiment *a = x, *b = y;

	if (a->when != b->when)
		return a->when < b->when ? -1 : 1;
	return a->attempt - b->attempt;
}

/* After the commit at index k: the attempts tried on it, oldest first. */
static void add_attempts(struct history *h, size_t k, struct tried *t, int na)
{
	size_t first = h->nr;

	for (int a = 0; a < na; a++) {
		if (!tried_on(&t[a], &h->e[k]) || add(h, &t[a].a->id, t[a].a))
			continue;
		t[a].used = 1;
		h->e[h->nr - 1].on = k;
	}
	qsort(h->e + first, h->nr - first, sizeof(*h->e), cmp_when);
}

int history_load(struct history *h, const char *name, int attempts)
{
	git_oid *kept;
	struct attempt *att = NULL;
	struct tried *t;
	size_t nk;
	int na = 0;

	snprintf(h->name, sizeof(h->name), "%s", name);
	if (walk_kept(&kept, &nk, name) < 0)
		return -1;
	if (attempts && (na = attempts_list_all(&att, name)) < 0)
		na = 0;
	t = tried_list(att, na, kept, nk);
	for (size_t i = nk; i-- > 0;) {
		if (add(h, &kept[i], NULL) == 0)
			add_attempts(h, h->nr - 1, t, na);
	}
	if (h->nr)
		h->baseline_us = h->e[0].result.time_us;
	for (int a = 0; a < na; a++)
		git_commit_free(t[a].parent);
	free(t);
	free(kept);
	free(att);
	return 0;
}

void history_release(struct history *h)
{
	for (size_t i = 0; i < h->nr; i++) {
		free(h->e[i].subject);
		free(h->e[i].message);
		free(h->e[i].ref);
		result_release(&h->e[i].result);
	}
	free(h->e);
	h->e = NULL;
	h->nr = h->alloc = 0;
}

char *history_remote(const struct history *h)
{
	struct strbuf key = STRBUF_INIT;
	char *remote;

	strbuf_addf(&key, "branch.autokernel/%s.remote", h->name);
	remote = config_string(key.buf, "origin");
	strbuf_release(&key);
	return remote;
}

void history_advise(const struct history *h)
{
	char *remote;

	if (!h->from_trailers)
		return;
	remote = history_remote(h);
	if (h->from_trailers == 1)
		warning("1 experiment of autokernel/%s has no note in "
			NOTES_REF ": its figures come from its trailers",
			h->name);
	else
		warning("%d experiments of autokernel/%s have no note in "
			NOTES_REF ": their figures come from their trailers",
			h->from_trailers, h->name);
	fprintf(stderr, "hint: fetch the notes with 'git fetch %s "
		"+" NOTES_REF ":refs/notes/remotes/%s/autokernel',\n"
		"hint: or with every fetch after 'git autokernel init "
		"--no-measure --share %s'\n", remote, remote, remote);
	free(remote);
}

const char *experiment_reason(const struct experiment *e)
{
	return result_reason(&e->result);
}

double experiment_head_ratio(const struct experiment *e)
{
	return e->result.head_ratio;
}

int experiment_is_kept(const struct experiment *e)
{
	return !e->attempt && e->result.note &&
		(!strcmp(e->status, "baseline") || !strcmp(e->status, "kept"));
}

const struct experiment *history_best(const struct history *h)
{
	const struct experiment *best = NULL;

	for (size_t i = 0; i < h->nr; i++) {
		const struct experiment *e = &h->e[i];

		if (experiment_is_kept(e) && e->result.time_us > 0 &&
		    (!best || e->result.time_us < best->result.time_us))
			best = e;
	}
	return best;
}

const struct experiment *history_current(const struct history *h)
{
	const struct experiment *current = NULL;

	for (size_t i = 0; i < h->nr; i++)
		if (!h->e[i].attempt && h->e[i].result.note)
			current = &h->e[i];
	return current;
}
