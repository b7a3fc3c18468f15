#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/landlock.h>
#include <linux/seccomp.h>
#include "lib/cell.h"
#include "lib/repo.h"

extern char **environ;

/* Rights of later Landlock ABIs, where the headers predate them. */
#ifndef LANDLOCK_ACCESS_FS_REFER
#define LANDLOCK_ACCESS_FS_REFER (1ULL << 13)
#endif
#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14)
#endif
#define NET_BIND_TCP (1ULL << 0)                /* ABI 4 */
#define NET_CONNECT_TCP (1ULL << 1)
#define SCOPE_ABSTRACT_UNIX_SOCKET (1ULL << 0)  /* ABI 6 */
#define SCOPE_SIGNAL (1ULL << 1)

/* landlock_ruleset_attr as ABI 6 has it; shorter ABIs get its head. */
struct ruleset_attr {
	__u64 handled_access_fs;
	__u64 handled_access_net;
	__u64 scoped;
};

#define FS_READ (LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_READ_FILE | \
		 LANDLOCK_ACCESS_FS_READ_DIR)
#define FS_OPEN (LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR | \
		 LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_TRUNCATE)
#define FS_WRITE (FS_OPEN | LANDLOCK_ACCESS_FS_REMOVE_DIR | \
		  LANDLOCK_ACCESS_FS_REMOVE_FILE | LANDLOCK_ACCESS_FS_MAKE_DIR | \
		  LANDLOCK_ACCESS_FS_MAKE_REG | LANDLOCK_ACCESS_FS_MAKE_SYM | \
		  LANDLOCK_ACCESS_FS_MAKE_FIFO | LANDLOCK_ACCESS_FS_MAKE_SOCK | \
		  LANDLOCK_ACCESS_FS_REFER)
/* The rights a rule on a file (not a directory) may carry. */
#define FS_FILE (LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE | \
		 LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_TRUNCATE)

int cell_enabled(void)
{
	static int enabled = -1;

	if (enabled < 0) {
		enabled = config_bool("autokernel.sandbox", 1);
		if (!enabled)
			warning("autokernel.sandbox is off: the candidate ran "
				"unconfined");
	}
	return enabled;
}

static int abi = -1, filters = -1;

void cell_probe(void)
{
	long v;

	if (abi >= 0)
		return;
	v = syscall(SYS_landlock_create_ruleset, NULL, 0,
		    LANDLOCK_CREATE_RULESET_VERSION);
	abi = v > 0 ? (int)v : 0;
	filters = prctl(PR_GET_SECCOMP, 0, 0, 0, 0) >= 0;
	/* once per run: the hooks that `run` starts inherit the mark */
	if (getenv("AK_CELL_WARNED") || (abi && filters))
		return;
	if (!abi)
		warning("no Landlock on this kernel: candidates are not "
			"confined");
	if (!filters)
		warning("no seccomp on this kernel: candidates are not kept "
			"from the network");
	setenv("AK_CELL_WARNED", "1", 1);
}

void cell_read(struct cell *c, const char *path)
{
	strvec_push(&c->read, path);
}

void cell_write(struct cell *c, const char *path)
{
	strvec_push(&c->write, path);
}

void cell_scratch(struct cell *c, const char *dir)
{
	free(c->scratch);
	c->scratch = xstrdup(dir);
	cell_write(c, dir);
}

void cell_release(struct cell *c)
{
	strvec_clear(&c->read);
	strvec_clear(&c->write);
	strvec_clear(&c->devices);
	free(c->scratch);
	c->scratch = NULL;
}

/* name looked up as execvp() would, resolved (and, in as_found when
 * given, as found, its links not followed); 0 or -1. */
static int which(char *out, const char *name, char *as_found)
{
	const char *path = getenv("PATH"), *p, *end;
	char cand[PATH_MAX];

	if (strchr(name, '/')) {
		if (as_found)
			snprintf(as_found, PATH_MAX, "%s", name);
		return realpath(name, out) ? 0 : -1;
	}
	for (p = path ? path : "/usr/bin:/bin"; *p; p = *end ? end + 1 : end) {
		end = strchrnul(p, ':');
		snprintf(cand, sizeof(cand), "%.*s/%s", (int)(end - p), p, name);
		if (!access(cand, X_OK) && realpath(cand, out)) {
			if (as_found)
				snprintf(as_found, PATH_MAX, "%s", cand);
			return 0;
		}
	}
	return -1;
}

/* Whether dir is /, $HOME or above it: a cell never reads all that. */
static int too_wide(const char *dir)
{
	const char *home = getenv("HOME");
	char h[PATH_MAX];
	size_t n = strlen(dir);

	if (!strcmp(dir, "/"))
		return 1;
	if (!home || !realpath(home, h))
		return 0;
	return !strncmp(h, dir, n) && (h[n] == '/' || !h[n]);
}

void cell_system(struct cell *c)
{
	/* The dynamic loader's files and what a libc reads, file by file:
	 * the rest of /etc holds what a root user can read and a kernel
	 * must not (shadow, ssh host keys, credentials of services). */
	static const char *const rd[] = {
		"/usr", "/lib", "/lib64", "/bin", "/sbin",
		"/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d",
		"/etc/ld.so.preload", "/etc/localtime", "/etc/nsswitch.conf",
		"/etc/passwd", "/etc/group", "/etc/alternatives",
		"/etc/os-release", "/etc/perl", "/etc/OpenCL",
		"/proc/self", "/proc/cpuinfo", "/proc/meminfo", "/proc/stat",
		"/proc/filesystems", "/proc/sys", "/sys/devices/system/cpu",
		"/sys/fs/cgroup",
	};
	static const char *const dev[] = {
		"/dev/null", "/dev/zero", "/dev/full", "/dev/random",
		"/dev/urandom",
	};

	cell_probe();
	c->landlock = abi;
	c->seccomp = filters;
	for (size_t i = 0; i < ARRAY_SIZE(rd); i++)
		cell_read(c, rd[i]);
	for (size_t i = 0; i < ARRAY_SIZE(dev); i++)
		strvec_push(&c->devices, dev[i]);
	cell_path_list(c, getenv("LD_LIBRARY_PATH"));
}

void cell_path_list(struct cell *c, const char *list)
{
	const char *end;
	char dir[PATH_MAX];

	for (; list && *list; list = *end ? end + 1 : end) {
		end = strchrnul(list, ':');
		snprintf(dir, sizeof(dir), "%.*s", (int)(end - list), list);
		if (dir[0] == '/' && !too_wide(dir))
			cell_read(c, dir);
	}
}

/* A Python virtual environment's interpreter is a link into another
 * installation, and reads the environment's pyvenv.cfg and packages:
 * the environment (the folder above bin/ of the link) is read too. */
static void venv(struct cell *c, char *found)
{
	char cfg[PATH_MAX + 16], *slash = strrchr(found, '/');

	if (!slash)
		return;
	*slash = '\0';
	if ((slash = strrchr(found, '/')) && !strcmp(slash, "/bin")) {
		*slash = '\0';
		snprintf(cfg, sizeof(cfg), "%s/pyvenv.cfg", found);
		if (found[0] && !access(cfg, R_OK) && !too_wide(found))
			cell_read(c, found);
	}
}

void cell_toolchain(struct cell *c, const char *compiler)
{
	char real[PATH_MAX], found[PATH_MAX], *slash;

	if (which(real, compiler, found) < 0)
		return;
	venv(c, found);
	cell_read(c, real);             /* itself, wherever it is */
	slash = strrchr(real, '/');
	*slash = '\0';                  /* its directory */
	slash = strrchr(real, '/');
	if (slash && !strcmp(slash, "/bin")) {
		*slash = '\0';          /* the install above bin/ */
		if (!real[0] || too_wide(real))
			*slash = '/';
	}
	if (real[0] && !too_wide(real))
		cell_read(c, real);
}

static void add_dev_files(struct cell *c)
{
	DIR *d = opendir("/dev");
	struct dirent *e;
	char path[PATH_MAX];

	if (!d)
		return;
	while ((e = readdir(d)))
		if (starts_with(e->d_name, "nvidia")) {
			snprintf(path, sizeof(path), "/dev/%s", e->d_name);
			strvec_push(&c->devices, path);
		}
	closedir(d);
}

void cell_gpu(struct cell *c)
{
	static const char *const rd[] = {
		"/proc/driver", "/proc/devices", "/proc/modules",
		"/sys/devices", "/sys/bus", "/sys/class", "/sys/module",
		"/sys/dev", "/sys/kernel/mm",
	};
	const char *mps = getenv("CUDA_MPS_PIPE_DIRECTORY");

	for (size_t i = 0; i < ARRAY_SIZE(rd); i++)
		cell_read(c, rd[i]);
	add_dev_files(c);
	/* CUDA's cuInit() names its threads (/proc/self/task/TID/comm) and
	 * fails with error 304 where it cannot; /proc/self is the process
	 * that enters the cell, the runner itself */
	strvec_push(&c->devices, "/proc/self/task");
	strvec_push(&c->devices, "/dev/kfd");
	strvec_push(&c->devices, "/dev/dri");
	cell_write(c, mps && *mps ? mps : "/tmp/nvidia-mps");
	c->unix_sockets = 1;
}

/* Names that never pass, whatever else they match. */
static int looks_secret(const char *name)
{
	static const char *const bad[] = {
		"KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL",
	};
	char up[256];
	size_t i;

	for (i = 0; name[i] && i < sizeof(up) - 1; i++)
		up[i] = toupper((unsigned char)name[i]);
	up[i] = '\0';
	for (i = 0; i < ARRAY_SIZE(bad); i++)
		if (strstr(up, bad[i]))
			return 1;
	return 0;
}

int cell_env_allowed(const char *name)
{
	static const char *const exact[] = {
		"PATH", "LANG", "LANGUAGE", "TZ", "LD_LIBRARY_PATH",
		"CPATH", "C_INCLUDE_PATH", "CPLUS_INCLUDE_PATH",
		"LIBRARY_PATH", "COMPILER_PATH", "GCC_EXEC_PREFIX",
		"SOURCE_DATE_EPOCH", "ASAN_OPTIONS", "UBSAN_OPTIONS",
		"LSAN_OPTIONS", "AUTOKERNEL_TRACE",
	};
	static const char *const prefix[] = {
		"LC_", "CUDA_", "NVCC_", "NVIDIA_", "HIP_", "HIPCC_", "ROCM_",
		"ROCR_", "HSA_", "AMD_", "GPU_", "OMP_", "GOMP_",
	};

	if (looks_secret(name))
		return 0;
	for (size_t i = 0; i < ARRAY_SIZE(exact); i++)
		if (!strcmp(name, exact[i]))
			return 1;
	for (size_t i = 0; i < ARRAY_SIZE(prefix); i++)
		if (starts_with(name, prefix[i]))
			return 1;
	return 0;
}

/* Sets or removes entry ("NAME=value" or "NAME") in env. */
static void env_apply(struct strvec *env, const char *entry)
{
	size_t n = strcspn(entry, "="), i;

	for (i = 0; i < env->nr; i++)
		if (!strncmp(env->v[i], entry, n) && env->v[i][n] == '=')
			break;
	if (i < env->nr) {
		free((char *)env->v[i]);
		env->v[i] = env->v[--env->nr];
		env->v[env->nr] = NULL;
	}
	if (entry[n] == '=')
		strvec_push(env, entry);
}

void cell_environ(struct strvec *out, const struct cell *c,
		  const struct strvec *set)
{
	char name[256];

	for (char **e = environ; e && *e; e++) {
		size_t n = strcspn(*e, "=");

		if (!(*e)[n] || n >= sizeof(name))
			continue;
		snprintf(name, sizeof(name), "%.*s", (int)n, *e);
		if (cell_env_allowed(name))
			strvec_push(out, *e);
	}
	if (c->scratch) {
		strvec_pushf(out, "TMPDIR=%s", c->scratch);
		strvec_pushf(out, "HOME=%s", c->scratch);
	}
	for (size_t i = 0; set && i < set->nr; i++)
		env_apply(out, set->v[i]);
}

static __u64 fs_handled(int version)
{
	__u64 all = (LANDLOCK_ACCESS_FS_MAKE_SYM << 1) - 1;

	if (version >= 2)
		all |= LANDLOCK_ACCESS_FS_REFER;
	if (version >= 3)
		all |= LANDLOCK_ACCESS_FS_TRUNCATE;
	/* ABI 5's IOCTL_DEV stays unhandled: a GPU is driven by ioctls. */
	return all;
}

/* One rule; a path that is not there (or not ours to see) is none. */
static int add_rule(int ruleset, const char *path, __u64 access,
		    __u64 handled)
{
	struct landlock_path_beneath_attr pb;
	struct stat st;
	int fd = open(path, O_PATH | O_CLOEXEC), r;

	if (fd < 0)
		return errno == ENOENT || errno == ENOTDIR ||
			errno == EACCES ? 0 : -1;
	if (fstat(fd, &st) == 0 && !S_ISDIR(st.st_mode))
		access &= FS_FILE;
	memset(&pb, 0, sizeof(pb));
	pb.allowed_access = access & handled;
	pb.parent_fd = fd;
	r = (int)syscall(SYS_landlock_add_rule, ruleset,
			 LANDLOCK_RULE_PATH_BENEATH, &pb, 0);
	close(fd);
	return r;
}

static int add_rules(int ruleset, const struct strvec *paths, __u64 access,
		     __u64 handled)
{
	for (size_t i = 0; i < paths->nr; i++)
		if (add_rule(ruleset, paths->v[i], access, handled) < 0)
			return -1;
	return 0;
}

static int landlock(const struct cell *c)
{
	struct ruleset_attr attr = { 0 };
	size_t size = sizeof(attr.handled_access_fs);
	int fd, ret = -1;

	attr.handled_access_fs = fs_handled(c->landlock);
	if (c->landlock >= 4) {
		attr.handled_access_net = NET_BIND_TCP | NET_CONNECT_TCP;
		size = offsetof(struct ruleset_attr, scoped);
	}
	if (c->landlock >= 6) {
		attr.scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL;
		size = sizeof(attr);
	}
	fd = (int)syscall(SYS_landlock_create_ruleset, &attr, size, 0);
	if (fd < 0)
		return -1;
	if (!add_rules(fd, &c->read, FS_READ, attr.handled_access_fs) &&
	    !add_rules(fd, &c->devices, FS_OPEN, attr.handled_access_fs) &&
	    !add_rules(fd, &c->write, FS_WRITE, attr.handled_access_fs))
		ret = (int)syscall(SYS_landlock_restrict_self, fd, 0);
	close(fd);
	return ret;
}

#if defined(__x86_64__)
#define CELL_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define CELL_ARCH AUDIT_ARCH_AARCH64
#endif
#ifdef SECCOMP_RET_KILL_PROCESS
#define RET_KILL SECCOMP_RET_KILL_PROCESS
#else
#define RET_KILL SECCOMP_RET_KILL
#endif
#define RET_EACCES (SECCOMP_RET_ERRNO | (EACCES & SECCOMP_RET_DATA))
#define RET_ENOSYS (SECCOMP_RET_ERRNO | (ENOSYS & SECCOMP_RET_DATA))
#define LOAD(field) BPF_STMT(BPF_LD | BPF_W | BPF_ABS, \
			     offsetof(struct seccomp_data, field))
#define IF_EQ(k, t, f) BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (k), (t), (f))
#define RETURN(v) BPF_STMT(BPF_RET | BPF_K, (v))

/*
 * socket() of every family but AF_UNIX (and of that too unless
 * unix_ok) fails with EACCES; io_uring, which creates sockets past
 * seccomp, is not there.  Both arches in question are little-endian:
 * args[0]'s low half is at its offset.
 */
static int no_network(int unix_ok)
{
#ifdef CELL_ARCH
	struct sock_filter f[] = {
		LOAD(arch),
		IF_EQ(CELL_ARCH, 1, 0),
		RETURN(RET_KILL),
		LOAD(nr),
#ifdef __x86_64__
		/* x32 system calls: the same arch, other numbers */
		BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 0x40000000, 0, 1),
		RETURN(RET_KILL),
#endif
		IF_EQ(__NR_io_uring_setup, 0, 1),
		RETURN(RET_ENOSYS),
		IF_EQ(__NR_socket, 1, 0),
		RETURN(SECCOMP_RET_ALLOW),
		LOAD(args[0]),
		IF_EQ(AF_UNIX, 0, 1),
		RETURN(unix_ok ? SECCOMP_RET_ALLOW : RET_EACCES),
		RETURN(RET_EACCES),
	};
	struct sock_fprog prog = { ARRAY_SIZE(f), f };

#ifdef SECCOMP_FILTER_FLAG_SPEC_ALLOW
	/*
	 * Where the kernel mitigates speculation for every seccomp task
	 * (spec_store_bypass_disable= or spectre_v2_user=seccomp, the
	 * default before Linux 5.16), a filter would also slow the
	 * runner's host side (a kernel's launch, the synchronize) and so
	 * its timings.  The mitigations protect the task from code beside
	 * it; the candidate holds no secret of the user's, so the filter
	 * leaves speculation as it was.  A kernel older than 4.17 refuses
	 * the flag: the plain filter then.
	 */
	if (!syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER,
		     SECCOMP_FILTER_FLAG_SPEC_ALLOW, &prog))
		return 0;
#endif
	return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0);
#else
	(void)unix_ok;
	return 0;
#endif
}

int cell_enter(const struct cell *c)
{
	/* a descriptor of a file outside would be a way around Landlock */
#ifdef SYS_close_range
	syscall(SYS_close_range, 3, ~0U, 0);
#endif
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return -1;
	if (c->landlock > 0 && landlock(c) < 0)
		return -1;
	if (c->seccomp && no_network(c->unix_sockets) < 0)
		return -1;
	return 0;
}

/*
 * Where a line of compiler output points, as [*f, *fe): "F:12:3: error:
 * ...", "F:12: ...", "F(12): error: ..." (nvcc), "\"F\", line 12: ...",
 * "F: In function 'f':", "In file included from F:3:", gcc's
 * "                 from F:3," and Python's '  File "F", line 12'.  0 for
 * a line that names no file: a tool's own ("collect2: error: ...",
 * "ptxas ..., line 5; error : ..."), or quoted source and carets (they
 * start with white space).
 */
static int location(const char *line, const char *eol, const char **f,
		    const char **fe)
{
	const char *p = line, *q;

	if (starts_with(p, "In file included from ")) {
		p += 22;
	} else if (*p == ' ' || *p == '\t') {
		p += strspn(p, " \t");
		if (starts_with(p, "File \""))
			p += 5;         /* Python: '  File "k.py", line 10' */
		else if (starts_with(p, "from "))
			p += 5;
		else
			return 0;
	}
	if (*p == '"' && (q = memchr(p + 1, '"', eol - p - 1)) &&
	    starts_with(q, "\", line ")) {
		*f = p + 1;
		*fe = q;
		return q > p + 1;
	}
	for (q = p; q < eol; q++) {
		if (*q == ':' && isdigit((unsigned char)q[1]))
			break;
		if (*q == ':' && (starts_with(q, ": In ") ||
				  starts_with(q, ": At ")))
			break;
		if (*q == ':' && q[1] == ' ')
			return 0;       /* "tool: message" */
		if (*q == '(' && isdigit((unsigned char)q[1])) {
			const char *r = q + 1 + strspn(q + 1, "0123456789");

			if (r[0] == ')' && r[1] == ':')
				break;
		}
	}
	*f = p;
	*fe = q;
	return q < eol && q > p;
}

struct diag {
	struct strbuf *out;
	size_t start;
	char dir[PATH_MAX];     /* the candidate's directory, resolved */
	char last[PATH_MAX];    /* the last file asked about, and the answer */
	int last_inside;
	int lines, first_error, left_out, capped;
};

/* Whether the file [f, fe) of a location lies beneath the directory. */
static int inside(struct diag *d, const char *f, const char *fe)
{
	char path[PATH_MAX], real[PATH_MAX];
	size_t n = strlen(d->dir);

	if ((size_t)(fe - f) >= sizeof(path))
		return 0;
	snprintf(path, sizeof(path), "%.*s", (int)(fe - f), f);
	if (!strcmp(path, d->last))
		return d->last_inside;
	snprintf(d->last, sizeof(d->last), "%s", path);
	d->last_inside = realpath(path, real) && !strncmp(real, d->dir, n) &&
		real[n] == '/';
	return d->last_inside;
}

static void keep(struct diag *d, const char *line, size_t n)
{
	enum { LINE_BYTES = 400 };
	size_t w = n > LINE_BYTES ? LINE_BYTES : n;

	if (d->lines >= CELL_DIAG_LINES ||
	    d->out->len - d->start + w + 4 > CELL_DIAG_BYTES) {
		d->capped = 1;
		return;
	}
	strbuf_add(d->out, line, w);
	strbuf_addstr(d->out, w < n ? "...\n" : "\n");
	d->lines++;
}

/* A line that names no file: kept when it names the candidate's file
 * ("1 error detected in the compilation of ...") or is the first error. */
static int tool_line(struct diag *d, const char *line, size_t n,
		     const char *src)
{
	char *s = xstrndup(line, n);
	int err = strstr(s, "error") || strstr(s, "Error") ||
		  strstr(s, "fatal"), k = 0;

	if (strstr(s, src))
		k = 1;
	else if (err && !d->first_error)
		k = d->first_error = 1;
	free(s);
	return k;
}

void cell_diagnostics(struct strbuf *out, const char *log, const char *src,
		      const char *dir)
{
	struct diag d = { .out = out, .start = out->len };
	int current = 0;        /* the diagnostic now shown is kept */

	if (!realpath(dir, d.dir))
		snprintf(d.dir, sizeof(d.dir), "%s", dir);
	for (const char *line = log; *line;) {
		const char *eol = strchrnul(line, '\n'), *f, *fe;
		size_t n = eol - line;

		if (location(line, eol, &f, &fe))
			current = inside(&d, f, fe);
		else if (*line != ' ' && *line != '\t' && n)
			current = tool_line(&d, line, n, src);
		if (n && current)
			keep(&d, line, n);
		else if (n)
			d.left_out = 1;
		line = *eol ? eol + 1 : eol;
	}
	if (d.left_out)
		strbuf_addstr(out, "(other lines of the compiler's output "
			      "left out)\n");
	if (d.capped)
		strbuf_addf(out, "(more left out: at most %d lines, %d "
			    "bytes)\n", CELL_DIAG_LINES, CELL_DIAG_BYTES);
}
