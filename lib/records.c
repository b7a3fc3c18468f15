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

static json_t *note_in(const char *ref, const git_oid *commit)
{
	git_note *note = NULL;
	json_t *j = NULL;

	if (git_note_read(&note, repo_need(), ref, commit) == 0) {
		j = json_loads(git_note_message(note), 0, NULL);
		git_note_free(note);
	}
	return j;
}

json_t *note_read(const git_oid *commit)
{
	git_reference_iterator *it = NULL;
	git_reference *ref;
	json_t *j = note_in(NOTES_REF, commit);

	if (j || git_reference_iterator_glob_new(&it, repo_need(),
						 NOTES_FETCHED_GLOB) < 0)
		return j;
	while (!j && git_reference_next(&ref, it) == 0) {
		j = note_in(git_reference_name(ref), commit);
		git_reference_free(ref);
	}
	git_reference_iterator_free(it);
	return j;
}

/* "17.05x" -> 17.05, "88%" -> 0.88; 0 when absent or not a number. */
static double trailer_number(const char *msg, const char *key)
{
	char *v = trailer_get(msg, key), *end = NULL;
	double x = v ? strtod(v, &end) : 0;

	if (!v || end == v || x < 0)
		x = 0;
	else if (*end == '%')
		x /= 100;
	free(v);
	return x;
}

static void set_trailer_number(json_t *j, const char *key, const char *msg,
			       const char *trailer)
{
	double x = trailer_number(msg, trailer);

	if (x > 0)
		json_object_set_new(j, key, json_real(x));
}

static void set_trailer_string(json_t *j, const char *key, const char *msg,
			       const char *trailer)
{
	char *v = trailer_get(msg, trailer);

	if (v)
		json_object_set_new(j, key, json_string(v));
	free(v);
}

/* "pass 5/5" -> {pass, stages_passed} */
static json_t *trailer_verify(const char *msg)
{
	char *v = trailer_get(msg, "Autokernel-Verify");
	json_t *j = NULL;
	int n = 0;

	if (v && sscanf(v, "%*s %d/", &n) == 1)
		j = json_pack("{s:b,s:i}", "pass", starts_with(v, "pass"),
			      "stages_passed", n);
	free(v);
	return j;
}

/* An attempt's "Rejected (<reason>): <verdict>" line, into j. */
static void rejection_line(json_t *j, const char *msg)
{
	const char *p = strstr(msg, "\nRejected (");
	const char *close = p ? strstr(p, "): ") : NULL;
	const char *eol;

	if (!close)
		return;
	p += strlen("\nRejected (");
	json_object_set_new(j, "reason", json_stringn(p, close - p));
	close += 3;
	eol = strchrnul(close, '\n');
	json_object_set_new(j, "verdict", json_stringn(close, eol - close));
}

json_t *note_from_trailers(const char *msg)
{
	json_t *j, *v = trailer_verify(msg);
	char *verdict;

	if (!v)
		return NULL;
	verdict = trailer_get(msg, "Autokernel-Verdict");
	j = json_pack("{s:s,s:s,s:o}", "source", "trailers", "status",
		      verdict ? "rejected" : "kept", "verify", v);
	set_trailer_string(j, "op", msg, "Autokernel-Op");
	set_trailer_string(j, "backend", msg, "Autokernel-Backend");
	v = json_object();
	set_trailer_string(v, "name", msg, "Autokernel-Device");
	json_object_set_new(j, "device", v);
	set_trailer_number(j, "time_us", msg, "Autokernel-Time-Us");
	set_trailer_number(j, "speedup", msg, "Autokernel-Speedup");
	set_trailer_number(j, "roofline", msg, "Autokernel-Roofline");
	if (verdict)
		rejection_line(j, msg);
	free(verdict);
	return j;
}

/* The notes ref's tip: 0 (*tip NULL when it has none yet), or -1. */
static int notes_tip(git_commit **tip, git_oid *tip_id)
{
	int e = git_reference_name_to_id(tip_id, repo_need(), NOTES_REF);

	*tip = NULL;
	if (e == GIT_ENOTFOUND)
		return 0;
	if (e < 0 || git_commit_lookup(tip, repo_need(), tip_id) < 0)
		return -1;
	return 0;
}

/*
 * A ref made only if it does not exist, decided under the ref's lock:
 * GIT_EMODIFIED when it does.  (git_reference_create() with force 0
 * checks before it locks, so two creators at once both "succeed" and
 * the first one's ref is lost: libgit2 1.5, seen losing one note or one
 * attempt in a few of 30 runs of unit-records under load.  A zero old
 * id is matched, under the lock, only by a missing ref.)
 */
static int ref_create_new(git_reference **ref, const char *name,
			  const git_oid *id, const char *msg)
{
	git_oid none;

	memset(&none, 0, sizeof(none));
	return git_reference_create_matching(ref, repo_need(), name, id, 1,
					     &none, msg);
}

/*
 * One note into the notes ref as a compare-and-swap: the new notes
 * commit is made on tip (read by notes_tip()), and the ref moves only if
 * it still points there.  (git_note_create() moves it unconditionally,
 * so two writers at once lose a note.)  1 when another writer won the
 * race.
 */
static int note_commit_on(git_commit *tip, const git_oid *tip_id,
			  const git_oid *commit, const char *text,
			  const git_signature *sig)
{
	git_repository *repo = repo_need();
	git_reference *ref = NULL;
	git_oid id, blob;
	int e;

	e = git_note_commit_create(&id, &blob, repo, tip, sig, sig, commit,
				   text, 1);
	if (!e && tip)
		e = git_reference_create_matching(&ref, repo, NOTES_REF, &id, 1,
						  tip_id, "notes: autokernel");
	else if (!e)
		e = ref_create_new(&ref, NOTES_REF, &id, "notes: autokernel");
	git_reference_free(ref);
	if (e == GIT_EMODIFIED || e == GIT_ELOCKED || e == GIT_EEXISTS)
		return 1;
	return e < 0 ? -1 : 0;
}

static int note_cas(const git_oid *commit, const char *text,
		    const git_signature *sig)
{
	git_commit *tip;
	git_oid tip_id;
	int e;

	if (notes_tip(&tip, &tip_id) < 0)
		return -1;
	e = note_commit_on(tip, &tip_id, commit, text, sig);
	git_commit_free(tip);
	return e;
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

/* commit's note as JSON in the notes commit tip; NULL if none. */
static json_t *note_at(git_commit *tip, const git_oid *commit)
{
	git_note *note = NULL;
	json_t *j = NULL;

	if (tip && !git_note_commit_read(&note, repo_need(), tip, commit)) {
		j = json_loads(git_note_message(note), 0, NULL);
		git_note_free(note);
	}
	return j;
}

/* One try of note_set(): 0, 1 (lost the race), -1, or -2 (no note). */
static int note_set_once(const git_oid *commit, const char *key,
			 json_t *value, const git_signature *sig)
{
	git_commit *tip;
	git_oid tip_id;
	json_t *note;
	char *text = NULL;
	int e = -2;

	if (notes_tip(&tip, &tip_id) < 0)
		return -1;
	/* ours as of the tip we write on, else a fetched one */
	if (!(note = note_at(tip, commit)))
		note = note_read(commit);
	if (note) {
		json_object_set(note, key, value);
		text = json_dumps(note, JSON_INDENT(1) | JSON_SORT_KEYS);
		e = text ? note_commit_on(tip, &tip_id, commit, text, sig) : -1;
	}
	free(text);
	json_decref(note);
	git_commit_free(tip);
	return e;
}

int note_set(const git_oid *commit, const char *key, json_t *value)
{
	git_signature *sig = signature();
	int e = 1;

	if (!sig)
		return error("unable to write a note: %s", repo_error());
	for (int tries = 0; tries < 500 && e == 1; tries++)
		if ((e = note_set_once(commit, key, value, sig)) == 1)
			usleep(1000 + pause_seed() % 20000);
	git_signature_free(sig);
	if (e == -2)
		return error("%.7s has no note to add '%s' to",
			     git_oid_tostr_s(commit), key);
	if (e)
		return error("unable to write the note on %s: %s",
			     git_oid_tostr_s(commit), repo_error());
	return 0;
}

/* The number at p, all of what is left, or -1. */
static int attempt_number(const char *p)
{
	char *end;
	long n;

	if (!isdigit((unsigned char)*p))
		return -1;
	n = strtol(p, &end, 10);
	return *end || n <= 0 || n > 1000000000 ? -1 : (int)n;
}

/* Ours first, then by remote; each in number order. */
static int cmp_attempt(const void *a, const void *b)
{
	const struct attempt *x = a, *y = b;
	int c = strcmp(x->remote, y->remote);

	return c ? c : x->n - y->n;
}

struct attempt_list {
	struct attempt *a;
	size_t nr, alloc;
};

static int listed(const struct attempt_list *l, const git_oid *id)
{
	for (size_t i = 0; i < l->nr; i++)
		if (git_oid_equal(&l->a[i].id, id))
			return 1;
	return 0;
}

/*
 * ref as an attempt of name: refs/autokernel/attempts/<name>/<n> (ours,
 * remote "") or refs/autokernel/remotes/<remote>/attempts/<name>/<n>.
 * 0, or -1 when it is neither.
 */
static int parse_attempt(struct attempt *a, const char *ref, const char *name)
{
	struct strbuf ours = STRBUF_INIT, mid = STRBUF_INIT;
	const char *p = NULL, *q = NULL, *num = NULL;   /* remote: p to q */

	strbuf_addf(&ours, "%s%s/", ATTEMPTS_PREFIX, name);
	strbuf_addf(&mid, "/attempts/%s/", name);
	if (starts_with(ref, ours.buf)) {
		p = q = ref;
		num = ref + ours.len;
	} else if (starts_with(ref, ATTEMPTS_FETCHED_PREFIX)) {
		p = ref + strlen(ATTEMPTS_FETCHED_PREFIX);
		q = strstr(p, mid.buf);
		num = q ? q + mid.len : NULL;
	}
	a->n = num ? attempt_number(num) : -1;
	strbuf_release(&ours);
	strbuf_release(&mid);
	if (a->n < 0 || (size_t)(q - p) >= sizeof(a->remote) ||
	    strlen(ref) >= sizeof(a->ref))
		return -1;
	snprintf(a->remote, sizeof(a->remote), "%.*s", (int)(q - p), p);
	snprintf(a->ref, sizeof(a->ref), "%s", ref);
	return 0;
}

/* Adds the attempts of name among the refs glob matches, sorted after
 * those listed before, leaving out commits listed already. */
static int list_glob(struct attempt_list *l, const char *glob,
		     const char *name)
{
	git_reference_iterator *it = NULL;
	git_reference *ref;
	size_t first = l->nr;

	if (git_reference_iterator_glob_new(&it, repo_need(), glob) < 0)
		return error("unable to list attempts: %s", repo_error());
	while (git_reference_next(&ref, it) == 0) {
		const git_oid *id = git_reference_target(ref);

		ALLOC_GROW(l->a, l->nr + 1, l->alloc);
		if (id && !listed(l, id) &&
		    !parse_attempt(&l->a[l->nr], git_reference_name(ref),
				   name)) {
			l->a[l->nr].id = *id;
			l->nr++;
		}
		git_reference_free(ref);
	}
	git_reference_iterator_free(it);
	if (l->nr > first)
		qsort(l->a + first, l->nr - first, sizeof(*l->a), cmp_attempt);
	return 0;
}

static int list_attempts(struct attempt **out, const char *name, int all)
{
	struct attempt_list l = { NULL, 0, 0 };
	struct strbuf glob = STRBUF_INIT;
	int ret;

	strbuf_addf(&glob, "%s%s/*", ATTEMPTS_PREFIX, name);
	ret = list_glob(&l, glob.buf, name);
	strbuf_reset(&glob);
	strbuf_addf(&glob, "%s*/attempts/%s/*", ATTEMPTS_FETCHED_PREFIX, name);
	if (!ret && all)
		ret = list_glob(&l, glob.buf, name);
	strbuf_release(&glob);
	*out = l.a;
	return ret < 0 ? ret : (int)l.nr;
}

int attempts_list(struct attempt **out, const char *name)
{
	return list_attempts(out, name, 0);
}

int attempts_list_all(struct attempt **out, const char *name)
{
	return list_attempts(out, name, 1);
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
		e = ref_create_new(&ref, refname.buf, out,
				   "autokernel: rejected candidate");
		/* taken, or being taken by another saver just now */
		if (e != GIT_EEXISTS && e != GIT_EMODIFIED && e != GIT_ELOCKED)
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
