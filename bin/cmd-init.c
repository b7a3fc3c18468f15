/*
 * cmd-init.c: `init`: hooks, config, the device's ceilings.
 */
#include <dirent.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "bin/builtin.h"
#include "judge/judge.h"
#include "lib/paths.h"
#include "lib/records.h"
#include "lib/repo.h"
#include "judge/setup.h"

static const char usage_init[] =
	"usage: git autokernel init [--no-measure] [--share <remote>]\n"
	"\n"
	"Installs the pre-commit, commit-msg and post-commit hooks into the\n"
	"effective hooks directory (core.hooksPath honoured; an existing hook\n"
	"is kept and chained), sets default autokernel.* config, and measures\n"
	"the device's copy bandwidth and matrix rate once.  --share configures\n"
	"<remote> to fetch and push the notes and attempts refs.\n";

/* The device's ceilings, measured again; 0, or negative after an error. */
static int measure(const char *backend)
{
	struct judge j = JUDGE_INIT;
	json_t *c;
	int rc = judge_start(&j, backend);

	if (rc)
		return rc;
	c = judge_ceilings(&j, 1);
	if (c) {
		json_t *m = json_object_get(c, "matrix_tflops");

		printf("%s: %s: copy %.0f GB/s", backend, judge_device_name(&j),
		       json_number_value(json_object_get(c, "copy_gbps")));
		if (m)
			printf(", matrix %.1f TFLOP/s bf16, %.1f f32",
			       json_number_value(json_object_get(m, "bf16")),
			       json_number_value(json_object_get(m, "f32")));
		printf("\n");
	}
	judge_stop(&j);
	return c ? 0 : -1;
}

static int share_remote(const char *remote);

/* Before anything changes: init --share of a remote that does not exist
 * installs nothing. */
static int remote_exists(const char *remote)
{
	struct strbuf key = STRBUF_INIT;
	char *url;
	int found;

	strbuf_addf(&key, "remote.%s.url", remote);
	url = config_string(key.buf, NULL);
	found = url != NULL;
	strbuf_release(&key);
	free(url);
	if (!found)
		return error("no remote '%s' (git remote -v lists them)",
			     remote);
	return 0;
}

int cmd_init(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "no-measure", no_argument, NULL, 'n' },
		{ "share", required_argument, NULL, 's' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *share = NULL;
	int do_measure = 1, opt;
	char *backend;

	while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		if (opt == 'n')
			do_measure = 0;
		else if (opt == 's')
			share = optarg;
		else
			return usage_with(usage_init, opt == 'h');
	}
	if (optind < argc)
		return usage_with(usage_init, 0);
	if (share && remote_exists(share) < 0)
		return 3;
	if (setup_repository(0) < 0)
		return 3;
	if (share && share_remote(share) < 0)
		return 3;
	if (!do_measure)
		return 0;
	backend = default_backend();
	if (measure(backend)) {
		free(backend);
		return 3;
	}
	free(backend);
	return 0;
}

/*
 * Results travel with push and fetch: ours are pushed to the remote's
 * refs/notes/autokernel and attempts refs (never forced), theirs arrive
 * beside ours under refs/notes/remotes/<remote>/ and
 * refs/autokernel/remotes/<remote>/, so a fetch never overwrites a local
 * note; log and report read them there (lib/records.h), and
 * `git notes --ref=autokernel merge` makes them ours.  Once a remote has
 * push refspecs plain `git push` uses only those, so HEAD is one of them.
 */
static int share_remote(const char *remote)
{
	struct strbuf key = STRBUF_INIT, val = STRBUF_INIT, have = STRBUF_INIT;
	static const char *const fetch[] = {
		"+" NOTES_REF ":refs/notes/remotes/%s/autokernel",
		"+" ATTEMPTS_PREFIX "*:refs/autokernel/remotes/%s/attempts/*",
	};
	static const char *const push[] = {
		"HEAD", NOTES_REF ":" NOTES_REF,
		ATTEMPTS_PREFIX "*:" ATTEMPTS_PREFIX "*",
	};
	size_t nr = ARRAY_SIZE(fetch) + ARRAY_SIZE(push);
	int ret = remote_exists(remote);

	for (size_t i = 0; i < nr && !ret; i++) {
		int is_fetch = i < ARRAY_SIZE(fetch);

		strbuf_reset(&key);
		strbuf_reset(&val);
		strbuf_reset(&have);
		strbuf_addf(&key, "remote.%s.%s", remote,
			    is_fetch ? "fetch" : "push");
		if (is_fetch)
			strbuf_addf(&val, fetch[i], remote);
		else
			strbuf_addstr(&val, push[i - ARRAY_SIZE(fetch)]);
		git_cmd(&have, 1, "config", "--get-all", key.buf, NULL);
		if (strstr(have.buf, val.buf))
			continue;
		if (git_cmd(NULL, 0, "config", "--add", key.buf, val.buf, NULL))
			ret = error("unable to set %s", key.buf);
	}
	if (!ret)
		printf("results of this repository now travel with "
		       "'git push %s' and 'git fetch %s'\n", remote, remote);
	strbuf_release(&key);
	strbuf_release(&val);
	strbuf_release(&have);
	return ret;
}
