#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "lib/paths.h"
#include "lib/records.h"
#include <git2/sys/repository.h>
#include "lib/repo.h"
#include "lib/trace.h"

void message_cleanup(struct strbuf *msg)
{
	struct strbuf out = STRBUF_INIT;
	const char *p = msg->buf;

	while (*p) {
		const char *eol = strchrnul(p, '\n');

		/* git's scissors line ends the message in verbose mode */
		if (starts_with(p, "# ------------------------ >8"))
			break;
		if (*p != '#')
			strbuf_add(&out, p, eol - p + (*eol ? 1 : 0));
		p = *eol ? eol + 1 : eol;
	}
	strbuf_trim(&out);
	strbuf_reset(msg);
	strbuf_add(msg, out.buf, out.len);
	strbuf_release(&out);
}

static int is_our_trailer(const char *line)
{
	return starts_with(line, "Autokernel-");
}

/* "Token: value" with a token of letters, digits and dashes. */
static int is_trailer_line(const char *p, const char *eol)
{
	const char *q = p;

	while (q < eol && (isalnum((unsigned char)*q) || *q == '-'))
		q++;
	return q > p && q < eol && *q == ':';
}

/* Whether the message's last paragraph (not its subject) is all trailer
 * lines, which ours then join. */
static int last_paragraph_is_trailers(const char *msg)
{
	const char *para = msg, *p, *q;

	for (p = msg; (q = strstr(p, "\n\n")); p = q + 2)
		para = q + 2;
	if (para == msg)
		return 0;
	while (*para) {
		const char *eol = strchrnul(para, '\n');

		if (!is_trailer_line(para, eol))
			return 0;
		para = *eol ? eol + 1 : eol;
	}
	return 1;
}

void trailers_apply(struct strbuf *msg, const struct trailer *t, int n)
{
	struct strbuf out = STRBUF_INIT;
	const char *p = msg->buf;

	while (*p) {
		const char *eol = strchrnul(p, '\n');

		if (!is_our_trailer(p))
			strbuf_add(&out, p, eol - p + (*eol ? 1 : 0));
		p = *eol ? eol + 1 : eol;
	}
	strbuf_trim(&out);
	if (out.len)
		strbuf_addstr(&out, last_paragraph_is_trailers(out.buf) ?
			      "\n" : "\n\n");
	for (int i = 0; i < n; i++)
		strbuf_addf(&out, "%s: %s\n", t[i].key, t[i].value);
	strbuf_reset(msg);
	strbuf_add(msg, out.buf, out.len);
	strbuf_release(&out);
}

char *trailer_get(const char *msg, const char *key)
{
	size_t klen = strlen(key);
	const char *p = msg;
	char *val = NULL;

	while (*p) {
		const char *eol = strchrnul(p, '\n');

		if (!strncmp(p, key, klen) && p[klen] == ':') {
			const char *v = p + klen + 1;

			while (*v == ' ')
				v++;
			free(val);
			val = xstrndup(v, eol - v);
		}
		p = *eol ? eol + 1 : eol;
	}
	return val;
}

static git_signature *signature(void)
{
	git_signature *sig = NULL;

	if (git_signature_default(&sig, repo_need()) < 0 &&
	    git_signature_now(&sig, "git-autokernel", "autokernel@localhost") < 0)
		return NULL;
	return sig;
}

json_t *note_read(const git_oid *commit)
{
	git_note *note = NULL;
	json_t *j = NULL;

	if (git_note_read(&note, repo_need(), NOTES_REF, commit) == 0) {
		j = json_loads(git_note_message(note), 0, NULL);
		git_note_free(note);
	}
	return j;
}

/*
 * One note into the notes ref as a compare-and-swap: the new notes
 * commit is made on the tip read, and the ref moves only if it still
 * points there.  (git_note_create() moves it unconditionally, so two
 * writers at once lose a note.)  1 when another writer won the race.
 */
static int note_cas(const git_oid *commit, const char *text,
		    const git_signature *sig)
{
	git_repository *repo = repo_need();
	git_reference *ref = NULL;
	git_commit *tip = NULL;
	git_oid tip_id, id, blob;
	int e, have;

	e = git_reference_name_to_id(&tip_id, repo, NOTES_REF);
	have = e == 0;
	if ((e < 0 && e != GIT_ENOTFOUND) ||
	    (have && git_commit_lookup(&tip, repo, &tip_id) < 0))
		return -1;
	e = git_note_commit_create(&id, &blob, repo, tip, sig, sig, commit,
				   text, 1);
	if (!e && have)
		e = git_reference_create_matching(&ref, repo, NOTES_REF, &id, 1,
						  &tip_id, "notes: autokernel");
	else if (!e)
		e = git_reference_create(&ref, repo, NOTES_REF, &id, 0,
					 "notes: autokernel");
	git_reference_free(ref);
	git_commit_free(tip);
	if (e == GIT_EMODIFIED || e == GIT_ELOCKED || e == GIT_EEXISTS)
		return 1;
	return e < 0 ? -1 : 0;
}

/* A pseudo-random number that differs between processes. */
static unsigned pause_seed(void)
{
	static unsigned seed;

	if (!seed)
		seed = (unsigned)getpid() ^ (unsigned)now_ns();
	return (unsigned)rand_r(&seed);
}

/* Concurrent writers (runs in two worktrees, git itself) all land their
 * notes: a lost race is tried again after a random pause. */
int note_write(const git_oid *commit, json_t *note)
{
	git_signature *sig = signature();
	char *text = json_dumps(note, JSON_INDENT(1) | JSON_SORT_KEYS);
	int ret = 0, e = 1;

	if (!sig || !text) {
		ret = error("unable to write a note: %s", repo_error());
		goto cleanup;
	}
	for (int tries = 0; tries < 500 && e == 1; tries++) {
		if ((e = note_cas(commit, text, sig)) == 1)
			usleep(1000 + pause_seed() % 20000);
	}
	if (e)
		ret = error("unable to write the note on %s: %s",
			    git_oid_tostr_s(commit), repo_error());
cleanup:
	free(text);
	git_signature_free(sig);
	return ret;
}

static int attempt_number(const char *ref, const char *prefix)
{
	const char *p = ref + strlen(prefix);
	char *end;
	long n = strtol(p, &end, 10);

	return *end || n <= 0 || n > 1000000000 ? -1 : (int)n;
}

static int cmp_attempt(const void *a, const void *b)
{
	return ((const struct attempt *)a)->n - ((const struct attempt *)b)->n;
}

int attempts_list(struct attempt **out, const char *name)
{
	git_reference_iterator *it = NULL;
	git_reference *ref;
	struct strbuf prefix = STRBUF_INIT, glob = STRBUF_INIT;
	struct attempt *list = NULL;
	size_t nr = 0, alloc = 0;

	strbuf_addf(&prefix, "%s%s/", ATTEMPTS_PREFIX, name);
	strbuf_addf(&glob, "%s*", prefix.buf);
	if (git_reference_iterator_glob_new(&it, repo_need(), glob.buf) < 0) {
		strbuf_release(&prefix);
		strbuf_release(&glob);
		return error("unable to list attempts: %s", repo_error());
	}
	while (git_reference_next(&ref, it) == 0) {
		int n = attempt_number(git_reference_name(ref), prefix.buf);
		const git_oid *id = git_reference_target(ref);

		if (n > 0 && id) {
			ALLOC_GROW(list, nr + 1, alloc);
			list[nr].n = n;
			list[nr].id = *id;
			nr++;
		}
		git_reference_free(ref);
	}
	git_reference_iterator_free(it);
	if (nr)
		qsort(list, nr, sizeof(*list), cmp_attempt);
	*out = list;
	strbuf_release(&prefix);
	strbuf_release(&glob);
	return (int)nr;
}

int attempt_save(int *n, git_oid *out, const char *name, const git_oid *tree,
		 const git_oid *parent, const char *message, json_t *note)
{
	git_signature *sig = signature();
	git_tree *t = NULL;
	git_commit *p = NULL;
	git_reference *ref = NULL;
	struct attempt *list = NULL;
	struct strbuf refname = STRBUF_INIT;
	const git_commit *parents[1];
	int count, ret = 0, e;

	if (!sig || git_tree_lookup(&t, repo_need(), tree) < 0 ||
	    (parent && git_commit_lookup(&p, repo_need(), parent) < 0)) {
		ret = error("unable to save the attempt: %s", repo_error());
		goto cleanup;
	}
	parents[0] = p;
	if (git_commit_create(out, repo_need(), NULL, sig, sig, NULL, message,
			      t, p ? 1 : 0, parents) < 0) {
		ret = error("unable to save the attempt: %s", repo_error());
		goto cleanup;
	}
	/* The number is the next free one; a concurrent saver loses the
	 * create-only race and takes the one after. */
	count = attempts_list(&list, name);
	*n = count > 0 ? list[count - 1].n + 1 : 1;
	for (int tries = 0; tries < 100; tries++, (*n)++) {
		strbuf_reset(&refname);
		strbuf_addf(&refname, "%s%s/%d", ATTEMPTS_PREFIX, name, *n);
		e = git_reference_create(&ref, repo_need(), refname.buf, out, 0,
					 "autokernel: rejected candidate");
		/* taken, or being taken by another saver just now */
		if (e != GIT_EEXISTS && e != GIT_ELOCKED)
			break;
	}
	if (e < 0) {
		ret = error("unable to create '%s': %s", refname.buf, repo_error());
		goto cleanup;
	}
	if (note)
		ret = note_write(out, note);
cleanup:
	free(list);
	git_reference_free(ref);
	git_commit_free(p);
	git_tree_free(t);
	git_signature_free(sig);
	strbuf_release(&refname);
	return ret;
}

void pending_key(struct strbuf *key, const git_oid *tree, const git_oid *head)
{
	strbuf_addf(key, "%s-", git_oid_tostr_s(tree));
	strbuf_addstr(key, head ? git_oid_tostr_s(head) : "0");
}

static void pending_path(struct strbuf *path, const char *key)
{
	strbuf_addf(path, "%s/pending", repo_autokernel_dir());
	mkdir_p(path->buf);
	strbuf_addf(path, "/%s.json", key);
}

int pending_save(const char *key, json_t *result)
{
	struct strbuf path = STRBUF_INIT;
	char *text = json_dumps(result, JSON_COMPACT | JSON_SORT_KEYS);
	int ret;

	pending_path(&path, key);
	ret = write_file_atomic(path.buf, text, strlen(text));
	free(text);
	strbuf_release(&path);
	return ret;
}

json_t *pending_load(const char *key)
{
	struct strbuf path = STRBUF_INIT;
	json_t *j;

	pending_path(&path, key);
	j = json_load_file(path.buf, 0, NULL);
	strbuf_release(&path);
	return j;
}

long long pending_time(const char *key)
{
	struct strbuf path = STRBUF_INIT;
	struct stat st;
	long long t;

	pending_path(&path, key);
	t = stat(path.buf, &st) == 0 ? (long long)st.st_mtime : 0;
	strbuf_release(&path);
	return t;
}

void pending_remove(const char *key)
{
	struct strbuf path = STRBUF_INIT;

	pending_path(&path, key);
	unlink(path.buf);
	strbuf_release(&path);
}

int repo_hook_index(git_index **out)
{
	const char *file = getenv("GIT_INDEX_FILE");
	int e;

	if (file && *file) {
		struct strbuf abs = STRBUF_INIT;

		if (*file != '/') {
			char cwd[4096];

			if (getcwd(cwd, sizeof(cwd)))
				strbuf_addf(&abs, "%s/", cwd);
		}
		strbuf_addstr(&abs, file);
		e = git_index_open(out, abs.buf);
		if (e == 0)
			git_repository_set_index(repo_need(), *out);
		strbuf_release(&abs);
	} else {
		e = git_repository_index(out, repo_need());
	}
	if (e < 0)
		return error("unable to read the index: %s", repo_error());
	return 0;
}

int repo_head(git_oid *out)
{
	int e = git_reference_name_to_id(out, repo_need(), "HEAD");

	if (e == GIT_ENOTFOUND || e == GIT_EUNBORNBRANCH)
		return 1;
	if (e < 0)
		return error("unable to resolve HEAD: %s", repo_error());
	return 0;
}

static char lock_path[4200];

static int pid_alive(long pid)
{
	return pid > 0 && (kill((pid_t)pid, 0) == 0 || errno == EPERM);
}

int lock_acquire(const char *what)
{
	char buf[256];
	int fd, tries;

	snprintf(lock_path, sizeof(lock_path), "%s/run.lock",
		 repo_autokernel_dir());
	for (tries = 0; tries < 2; tries++) {
		fd = open(lock_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
		if (fd >= 0) {
			int n = snprintf(buf, sizeof(buf), "%ld %s\n",
					 (long)getpid(), what);

			if (write(fd, buf, n) != n) {
				close(fd);
				unlink(lock_path);
				return error_errno("unable to write '%s'", lock_path);
			}
			close(fd);
			return 0;
		}
		if (errno != EEXIST)
			return error_errno("unable to create '%s'", lock_path);
		{
			struct strbuf sb = STRBUF_INIT;
			long pid = 0;

			strbuf_read_file(&sb, lock_path);
			pid = strtol(sb.buf, NULL, 10);
			if (pid_alive(pid)) {
				strbuf_trim(&sb);
				error("another git autokernel is running in this "
				      "repository (pid %s); '%s' holds the lock",
				      sb.buf, lock_path);
				strbuf_release(&sb);
				return -1;
			}
			warning("removing a stale lock of pid %ld (no such "
				"process)", pid);
			strbuf_release(&sb);
			unlink(lock_path);
		}
	}
	return error("unable to take '%s'", lock_path);
}

void lock_release(void)
{
	if (lock_path[0])
		unlink(lock_path);
	lock_path[0] = '\0';
}
