#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "lib/paths.h"
#include "lib/strbuf.h"

static char exe[PATH_MAX], datadir[PATH_MAX + 64], libexec[PATH_MAX + 64];
static char cachedir[PATH_MAX];

static int is_file(const char *dir, const char *name)
{
	char p[PATH_MAX + 64];
	struct stat st;

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	return !stat(p, &st);
}

static void resolve(void)
{
	char dir[PATH_MAX], up[PATH_MAX + 8];
	const char *home = getenv("AUTOKERNEL_HOME");
	ssize_t n;

	if (exe[0])
		return;
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0)
		snprintf(exe, sizeof(exe), "git-autokernel");
	else
		exe[n] = '\0';
	snprintf(dir, sizeof(dir), "%s", exe);
	if (strrchr(dir, '/'))
		*strrchr(dir, '/') = '\0';
	snprintf(up, sizeof(up), "%s/..", dir);
	if (is_file(up, "include/autokernel.h") && is_file(up, "kernels")) {
		realpath(up, datadir);
		snprintf(libexec, sizeof(libexec), "%s", dir);
	} else {
		char share[PATH_MAX + 32];

		snprintf(share, sizeof(share), "%s/../share/git-autokernel", dir);
		if (!realpath(share, datadir))
			snprintf(datadir, sizeof(datadir), "%s", share);
		snprintf(share, sizeof(share), "%s/../libexec/git-autokernel",
			 dir);
		if (!realpath(share, libexec))
			snprintf(libexec, sizeof(libexec), "%s", share);
	}
	if (home && *home)
		snprintf(datadir, sizeof(datadir), "%s", home);
}

const char *ak_exe(void)
{
	resolve();
	return exe;
}

const char *ak_datadir(void)
{
	resolve();
	return datadir;
}

const char *ak_libexecdir(void)
{
	const char *over = getenv("AUTOKERNEL_LIBEXEC");

	resolve();
	return over && *over ? over : libexec;
}

int mkdir_p(const char *path)
{
	char buf[PATH_MAX];

	snprintf(buf, sizeof(buf), "%s", path);
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, 0777) < 0 && errno != EEXIST)
			return error_errno("unable to create '%s'", buf);
		*p = '/';
	}
	if (mkdir(buf, 0777) < 0 && errno != EEXIST)
		return error_errno("unable to create '%s'", buf);
	return 0;
}

const char *ak_cachedir(void)
{
	const char *env = getenv("AUTOKERNEL_CACHE");
	const char *xdg = getenv("XDG_CACHE_HOME");
	const char *home = getenv("HOME");

	if (cachedir[0])
		return cachedir;
	if (env && *env)
		snprintf(cachedir, sizeof(cachedir), "%s", env);
	else if (xdg && *xdg)
		snprintf(cachedir, sizeof(cachedir), "%s/git-autokernel", xdg);
	else
		snprintf(cachedir, sizeof(cachedir), "%s/.cache/git-autokernel",
			 home && *home ? home : "/tmp");
	if (mkdir_p(cachedir) < 0)
		snprintf(cachedir, sizeof(cachedir), "/tmp/git-autokernel-%d",
			 (int)getuid());
	mkdir_p(cachedir);
	return cachedir;
}

static int remove_one(const char *path, const struct stat *st, int flag,
		      struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	remove(path);
	return 0;
}

int remove_tree(const char *path)
{
	struct stat st;

	if (lstat(path, &st) < 0)
		return errno == ENOENT ? 0 : -1;
	return nftw(path, remove_one, 16, FTW_DEPTH | FTW_PHYS);
}
