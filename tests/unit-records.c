/*
 * unit-records.c: what lands in git, written by several processes at
 * once (two worktrees' runs share refs/notes/autokernel and the attempts
 * refs): every note and every attempt lands, none is lost to a race;
 * keys set in one note at once by several processes (note_set()) all
 * land.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "lib/paths.h"
#include "lib/records.h"
#include "lib/repo.h"
#include "tests/tap.h"

#define WRITERS 4
#define EACH 25

static git_oid empty_tree;

/* A commit of an empty tree, one per number, in the repository. */
static int make_commit(git_oid *out, int n)
{
	git_repository *repo = repo_need();
	git_treebuilder *tb = NULL;
	git_signature *sig = NULL;
	git_tree *tree = NULL;
	git_oid tid;
	char msg[64];
	int e;

	snprintf(msg, sizeof(msg), "commit %d\n", n);
	e = git_treebuilder_new(&tb, repo, NULL) ||
		git_treebuilder_write(&tid, tb) ||
		(empty_tree = tid, 0) ||
		git_tree_lookup(&tree, repo, &tid) ||
		git_signature_now(&sig, "t", "t@example.com") ||
		git_commit_create(out, repo, NULL, sig, sig, NULL, msg, tree,
				  0, NULL);
	git_treebuilder_free(tb);
	git_tree_free(tree);
	git_signature_free(sig);
	return e ? -1 : 0;
}

static void writer(const git_oid *ids, int w)
{
	int bad = 0;

	repo_close();           /* a process of its own, as a hook is */
	for (int i = 0; i < EACH; i++) {
		json_t *note = json_pack("{s:i,s:i}", "writer", w, "i", i);
		git_oid att;
		char msg[64];
		int n;

		bad |= note_write(&ids[w * EACH + i], note) < 0;
		snprintf(msg, sizeof(msg), "attempt %d of writer %d\n", i, w);
		bad |= attempt_save(&n, &att, "race", &empty_tree, NULL,
				    msg, note) < 0;
		json_decref(note);
	}
	repo_close();
	_exit(bad);
}

/* Keys "<w>.<i>" into the note of id, as bench --record sets "torch". */
static void setter(const git_oid *id, int w)
{
	int bad = 0;

	repo_close();
	for (int i = 0; i < EACH; i++) {
		json_t *v = json_integer(i);
		char key[32];

		snprintf(key, sizeof(key), "%d.%d", w, i);
		bad |= note_set(id, key, v) < 0;
		json_decref(v);
	}
	repo_close();
	_exit(bad);
}

/* WRITERS processes set EACH keys each in the note of id: 1 if all
 * land and the note's "writer" stays. */
static int keys_race(const git_oid *id)
{
	json_t *note;
	int all_ok = 1, keys;

	fflush(stdout);
	for (int w = 0; w < WRITERS; w++)
		if (fork() == 0)
			setter(id, w);
	for (int w = 0; w < WRITERS; w++) {
		int st;

		wait(&st);
		all_ok &= WIFEXITED(st) && WEXITSTATUS(st) == 0;
	}
	note = note_read(id);
	keys = (int)json_object_size(note);
	all_ok &= keys == WRITERS * EACH + 2 &&
		json_object_get(note, "writer") != NULL;
	json_decref(note);
	return all_ok;
}

int main(void)
{
	char dir[] = "/tmp/ak-unit-records-XXXXXX";
	git_oid ids[WRITERS * EACH], lone;
	json_t *one;
	git_repository *init = NULL;
	struct attempt *list = NULL;
	int made = 0, all_ok = 1, found = 0, n;

	if (!mkdtemp(dir) || git_libgit2_init() < 0 ||
	    git_repository_init(&init, dir, 0) < 0 || chdir(dir) < 0) {
		ok(0, "a scratch repository");
		return tap_done();
	}
	git_repository_free(init);
	for (int i = 0; i < WRITERS * EACH; i++)
		made += make_commit(&ids[i], i) == 0;
	ok(made == WRITERS * EACH, "%d commits to annotate", made);
	fflush(stdout);
	for (int w = 0; w < WRITERS; w++)
		if (fork() == 0)
			writer(ids, w);
	for (int w = 0; w < WRITERS; w++) {
		int st;

		wait(&st);
		all_ok &= WIFEXITED(st) && WEXITSTATUS(st) == 0;
	}
	ok(all_ok, "%d processes wrote %d notes and attempts each, no "
	   "error", WRITERS, EACH);
	for (int i = 0; i < WRITERS * EACH; i++) {
		json_t *note = note_read(&ids[i]);

		found += note && json_integer_value(json_object_get(note,
			"writer")) == i / EACH;
		json_decref(note);
	}
	ok(found == WRITERS * EACH, "all %d notes are there (%d found)",
	   WRITERS * EACH, found);
	n = attempts_list(&list, "race");
	ok(n == WRITERS * EACH && list[n - 1].n == n,
	   "attempts 1..%d, each its own number (%d listed)", WRITERS * EACH,
	   n);
	free(list);
	ok(keys_race(&ids[0]), "%d processes set %d keys each in one note: "
	   "all are there, and what it held", WRITERS, EACH);
	one = json_integer(1);
	ok(make_commit(&lone, -1) == 0 && note_set(&lone, "k", one) < 0,
	   "a commit without a note gets no key");
	json_decref(one);
	repo_close();
	remove_tree(dir);
	return tap_done();
}
