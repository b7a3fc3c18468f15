#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include "lib/paths.h"
#include "lib/tempdir.h"
#include "lib/usage.h"

#define MAX_DIRS 32
#define PATH_LEN 4352

/* Registered paths; a slot is in use while its first byte is not 0, so
 * the signal handler reads them without a lock. */
static char dirs[MAX_DIRS][PATH_LEN];

char *tempdir_make(const char *parent)
{
	char path[PATH_LEN];

	snprintf(path, sizeof(path), "%s/tmp-%d-XXXXXX", parent, (int)getpid());
	if (!mkdtemp(path)) {
		error_errno("unable to create '%s'", path);
		return NULL;
	}
	for (int i = 0; i < MAX_DIRS; i++)
		if (!dirs[i][0]) {
			memcpy(dirs[i], path, strlen(path) + 1);
			break;
		}
	return xstrdup(path);
}

void tempdir_remove(const char *dir)
{
	if (!dir)
		return;
	remove_tree(dir);
	for (int i = 0; i < MAX_DIRS; i++)
		if (!strcmp(dirs[i], dir))
			dirs[i][0] = '\0';
}

struct linux_dirent64 {
	unsigned long long d_ino;
	long long d_off;
	unsigned short d_reclen;
	unsigned char d_type;
	char d_name[];
};

/* Removes what dirfd holds, with system calls only (signal-safe); 1 when
 * it removed something. */
static int empty_pass(int dirfd, int depth)
{
	char buf[4096];
	long n;
	int removed = 0;

	while ((n = syscall(SYS_getdents64, dirfd, buf, sizeof(buf))) > 0) {
		for (long off = 0; off < n;) {
			struct linux_dirent64 *d = (void *)(buf + off);
			const char *name = d->d_name;
			int sub;

			off += d->d_reclen;
			if (!strcmp(name, ".") || !strcmp(name, ".."))
				continue;
			if (unlinkat(dirfd, name, 0) == 0) {
				removed = 1;
				continue;
			}
			if (depth > 8)
				continue;
			sub = openat(dirfd, name, O_RDONLY | O_DIRECTORY |
				     O_NOFOLLOW | O_CLOEXEC);
			if (sub < 0)
				continue;
			while (empty_pass(sub, depth + 1))
				lseek(sub, 0, SEEK_SET);
			close(sub);
			if (unlinkat(dirfd, name, AT_REMOVEDIR) == 0)
				removed = 1;
		}
	}
	return removed;
}

void tempdir_remove_all(void)
{
	for (int i = 0; i < MAX_DIRS; i++) {
		int fd;

		if (!dirs[i][0])
			continue;
		fd = open(dirs[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
			  O_CLOEXEC);
		if (fd >= 0) {
			/* a directory read while it changes may skip names */
			while (empty_pass(fd, 0))
				lseek(fd, 0, SEEK_SET);
			close(fd);
		}
		rmdir(dirs[i]);
		dirs[i][0] = '\0';
	}
}

/* Whether a tmp- name belongs to no running process. */
static int is_stale(const char *parent, const char *name)
{
	char path[PATH_LEN], *end;
	long pid = strtol(name + 4, &end, 10);
	struct stat st;

	if (end != name + 4 && *end == '-')
		return pid > 0 && kill((pid_t)pid, 0) < 0 && errno == ESRCH;
	/* tmp-XXXXXX of a version that did not name its process */
	snprintf(path, sizeof(path), "%s/%s", parent, name);
	return strlen(name) == 10 && !stat(path, &st) &&
		time(NULL) - st.st_mtime > 3600;
}

void tempdir_sweep(const char *parent)
{
	DIR *d = opendir(parent);
	struct dirent *e;
	char path[PATH_LEN];

	if (!d)
		return;
	while ((e = readdir(d)))
		if (!strncmp(e->d_name, "tmp-", 4) &&
		    is_stale(parent, e->d_name)) {
			snprintf(path, sizeof(path), "%s/%s", parent, e->d_name);
			remove_tree(path);
		}
	closedir(d);
}
