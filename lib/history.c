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

static void add(struct history *h, const git_oid *id, int attempt)
{
	git_commit *c = NULL;
	struct experiment *e;

	if (git_commit_lookup(&c, repo_need(), id) < 0)
		return;
	ALLOC_GROW(h->e, h->nr + 1, h->alloc);
	e = &h->e[h->nr++];
	memset(e, 0, sizeof(*e));
	e->id = *id;
	e->attempt = attempt;
	e->subject = xstrdup(git_commit_summary(c) ? git_commit_summary(c) : "");
	e->message = xstrdup(git_commit_message(c));
	e->when = (long long)git_commit_time(c);
	e->note = note_read(id);
	if (attempt)
		e->status = "rejected";
	else if (!e->note)
		e->status = "unverified";
	else
		e->status = json_string_value(json_object_get(e->note, "status")) ?
			json_string_value(json_object_get(e->note, "status")) :
			"kept";
	git_commit_free(c);
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

int history_load(struct history *h, const char *name, int attempts)
{
	git_oid *kept;
	struct attempt *att = NULL;
	size_t nk;
	int na = 0;

	snprintf(h->name, sizeof(h->name), "%s", name);
	if (walk_kept(&kept, &nk, name) < 0)
		return -1;
	if (attempts && (na = attempts_list(&att, name)) < 0)
		na = 0;
	for (size_t i = nk; i-- > 0;) {
		add(h, &kept[i], 0);
		/* the attempts tried while this commit was HEAD */
		for (int a = 0; a < na; a++) {
			git_commit *c = NULL;

			if (git_commit_lookup(&c, repo_need(), &att[a].id) == 0 &&
			    git_commit_parentcount(c) &&
			    git_oid_equal(git_commit_parent_id(c, 0), &kept[i]))
				add(h, &att[a].id, att[a].n);
			git_commit_free(c);
		}
	}
	if (h->nr && h->e[0].note)
		h->baseline_us = json_number_value(json_object_get(h->e[0].note,
								 "time_us"));
	free(kept);
	free(att);
	return 0;
}

void history_release(struct history *h)
{
	for (size_t i = 0; i < h->nr; i++) {
		free(h->e[i].subject);
		free(h->e[i].message);
		json_decref(h->e[i].note);
	}
	free(h->e);
	h->e = NULL;
	h->nr = h->alloc = 0;
}

const char *experiment_reason(const struct experiment *e)
{
	const char *r = json_string_value(json_object_get(e->note, "reason"));

	return r ? r : "";
}
