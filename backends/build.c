#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <git2.h>
#include "backends/build.h"
#include "lib/cell.h"
#include "lib/paths.h"
#include "lib/python.h"
#include "lib/run.h"
#include "lib/tempdir.h"

/* The flags of a backend before its arch's. */
static void base_args(struct strvec *a, const char *backend)
{
	if (!strcmp(backend, "host")) {
		strvec_pushl(a, "-std=gnu11", "-O3", "-march=native",
			     "-fopenmp", "-shared", "-fPIC", NULL);
	} else if (!strcmp(backend, "cuda")) {
		/* A build is what an agent waits for most.  --threads 2:
		 * nvcc runs the host chain (cudafe++, the host compiler)
		 * beside the device chain (cicc, ptxas) instead of after it
		 * (0.7 s of 4 on an H200's host).  nvcc's -O is the host
		 * compiler's alone (cicc and ptxas optimize fully either
		 * way): -O1 is enough for launch code, and the host compile,
		 * which waits for ptxas, is 0.2 s shorter than at -O3. */
		strvec_pushl(a, "-O1", "-lineinfo", "--threads", "2", "-shared",
			     "-Xcompiler", "-fPIC", NULL);
	} else if (!strcmp(backend, "hip")) {
		/* hipcc 5.x defaults to C++11; kernels are written in the
		 * C++17 that nvcc and newer hipcc default to. */
		strvec_pushl(a, "-std=c++17", "-O3", "-shared", "-fPIC",
			     "-x", "hip", NULL);
	}
}

/* The flags that pick the device: none on host (-march=native). */
static void arch_args(struct strvec *a, const char *backend,
		      const char *arch)
{
	if (!strcmp(backend, "cuda")) {
		const char *sm = arch && *arch ? arch : "sm_90";

		/* A kernel is built for the device it runs on, so Hopper's
		 * arch-specific instructions (wgmma, setmaxnreg) are fair:
		 * sm_90 builds as sm_90a, in the -gencode form that does not
		 * also run a plain sm_90 pass. */
		if (!strcmp(sm, "sm_90"))
			strvec_push(a, "-gencode=arch=compute_90a,code=sm_90a");
		else
			strvec_pushf(a, "-arch=%s", sm);
	} else if (!strcmp(backend, "hip")) {
		strvec_pushf(a, "--offload-arch=%s",
			     arch && *arch ? arch : "gfx90a");
	}
}

static void compile_args(struct strvec *a, const char *backend,
			 const char *arch, const char *inc)
{
	strvec_push(a, backend_compiler(backend));
	base_args(a, backend);
	arch_args(a, backend, arch);
	strvec_pushf(a, "-I%s", inc);
}

/* Libraries go after the source on the command line. */
static void link_args(struct strvec *a, const char *backend)
{
	if (!strcmp(backend, "host"))
		strvec_push(a, "-lm");
}

/* The compiler's version line, asked once per process and compiler. */
static const char *compiler_version(const char *cc, int *missing)
{
	static char last_cc[4096], version[1024];
	struct child c = CHILD_INIT;
	int rc;

	if (!strcmp(last_cc, cc))
		return version;
	strvec_pushl(&c.args, cc, "--version", NULL);
	c.capture = 1;
	c.merge_err = 1;
	c.no_stdin = 1;
	c.timeout_ms = 30000;
	rc = run_child(&c);
	*missing = rc != 0;
	snprintf(version, sizeof(version), "%s", c.out.buf);
	if (!*missing)
		snprintf(last_cc, sizeof(last_cc), "%s", cc);
	child_release(&c);
	return version;
}

int build_command(struct build_command *cmd, const char *backend,
		  const char *arch)
{
	int missing = 0;

	cmd->compiler = backend_compiler(backend);
	base_args(&cmd->flags, backend);
	arch_args(&cmd->arch, backend, arch);
	link_args(&cmd->libs, backend);
	strbuf_addstr(&cmd->version, compiler_version(cmd->compiler,
						      &missing));
	strbuf_trim(&cmd->version);
	return missing ? -2 : 0;
}

void build_command_release(struct build_command *cmd)
{
	strvec_clear(&cmd->flags);
	strvec_clear(&cmd->arch);
	strvec_clear(&cmd->libs);
	strbuf_release(&cmd->version);
}

static int is_header(const struct dirent *de)
{
	return ends_with(de->d_name, ".h");
}

int kernel_headers(struct strvec *names, const char *inc)
{
	struct dirent **list;
	int n = scandir(inc, &list, is_header, alphasort);

	if (n < 0)
		return error_errno("unable to list the headers in '%s'", inc);
	for (int i = 0; i < n; i++) {
		strvec_push(names, list[i]->d_name);
		free(list[i]);
	}
	free(list);
	return 0;
}

/* The cache key: the command line, the compiler's version, every header
 * a kernel may include and the source. */
static int hash_key(char *hex, const struct strvec *args, const char *ver,
		    const char *src, const char *inc)
{
	struct strbuf all = STRBUF_INIT, path = STRBUF_INIT;
	struct strvec headers = STRVEC_INIT;
	git_oid oid;
	int ret = kernel_headers(&headers, inc);

	for (size_t i = 0; i < args->nr; i++)
		strbuf_addf(&all, "%s\n", args->v[i]);
	strbuf_addf(&all, "%s\n", ver);
	for (size_t i = 0; !ret && i < headers.nr; i++) {
		strbuf_reset(&path);
		strbuf_addf(&path, "%s/%s", inc, headers.v[i]);
		if (strbuf_read_file(&all, path.buf) < 0)
			ret = error_errno("unable to read '%s'", path.buf);
	}
	if (!ret && strbuf_read_file(&all, src) < 0)
		ret = error_errno("unable to read '%s'", src);
	if (!ret && git_odb_hash(&oid, all.buf, all.len, GIT_OBJECT_BLOB) < 0)
		ret = error("unable to hash '%s'", src);
	if (!ret)
		git_oid_tostr(hex, GIT_OID_HEXSZ + 1, &oid);
	strvec_clear(&headers);
	strbuf_release(&all);
	strbuf_release(&path);
	return ret;
}

/*
 * The compiler's cell: it reads the toolchain, include/ and the kernel's
 * own directory, and writes only its scratch directory, where the object
 * is made; nothing else of the cache is written.
 */
static void build_cell(struct cell *cell, const char *compiler,
		       const char *inc, const char *src, const char *scratch)
{
	char *dir = xstrdup(src);

	if (strrchr(dir, '/'))
		*strrchr(dir, '/') = '\0';
	cell_system(cell);
	cell_toolchain(cell, compiler);
	cell_read(cell, inc);
	cell_read(cell, dir);
	cell_scratch(cell, scratch);
	free(dir);
}

/* src's text at dst, which appears whole or not at all. */
static int store_copy(const char *src, const char *dst)
{
	struct strbuf text = STRBUF_INIT;
	int ret;

	if (strbuf_read_file(&text, src) < 0)
		ret = error_errno("unable to read '%s'", src);
	else
		ret = write_file_atomic(dst, text.buf, text.len);
	strbuf_release(&text);
	return ret;
}

/*
 * The object a build makes, in the cache: the compiler's version (-2
 * when it is missing, its answer in log), the hash of the command line,
 * that version and the source, and so = <cachedir>/build/<hash><ext>,
 * with *cached set when it is there already.  dir gets the cache's
 * folder.  0, -1 (the kernel unreadable; status says so) or -2.
 */
static int object_path(struct strbuf *so, struct strbuf *dir,
		       struct strbuf *log, struct strbuf *status,
		       const struct strvec *args, const char *src,
		       const char *ext, int *cached)
{
	struct strbuf inc = STRBUF_INIT;
	char hex[GIT_OID_HEXSZ + 1];
	const char *ver;
	struct stat st;
	int missing = 0, ret = 0;

	ver = compiler_version(args->v[0], &missing);
	if (missing) {
		strbuf_addf(log, "%s: %s", args->v[0], ver);
		return -2;
	}
	strbuf_addf(&inc, "%s/include", ak_datadir());
	strbuf_addf(dir, "%s/build", ak_cachedir());
	if (hash_key(hex, args, ver, src, inc.buf) < 0) {
		/* a missing kernel file, not a missing toolchain */
		strbuf_addstr(status, "unable to read the kernel");
		ret = -1;
	} else if (mkdir_p(dir->buf) < 0) {
		ret = -2;
	} else {
		strbuf_reset(so);
		strbuf_addf(so, "%s/%s%s", dir->buf, hex, ext);
		*cached = !stat(so->buf, &st);
	}
	strbuf_release(&inc);
	return ret;
}

/* Runs the build step c (its output into log), under a time limit; 0,
 * or -1 with status saying how it ended ("nvcc exited with 2"). */
static int run_step(struct child *c, struct strbuf *log, struct strbuf *status,
		    int timeout_ms)
{
	char why[128];
	int rc;

	c->capture = 1;
	c->merge_err = 1;
	c->no_stdin = 1;
	c->timeout_ms = timeout_ms;
	rc = run_child(c);
	strbuf_add(log, c->out.buf, c->out.len);
	if (!rc)
		return 0;
	child_describe(c, rc, why, sizeof(why));
	strbuf_addf(status, "%s %s", c->args.v[0], why);
	return -1;
}

/*
 * Triton's build step here: there is no compiler to run before the
 * device.  The interpreter that imports torch checks the kernel's syntax
 * (ak_runner_triton.py --check), and the "object" is a copy of the source
 * in the cache, named by the hash of the source and the interpreter's
 * version; the runner imports it, and Triton compiles it into its own
 * cache, under ours, when the judge warms it up (verify/runners.h).
 */
static int build_python(struct strbuf *so, struct strbuf *log,
			struct strbuf *status, const char *src,
			int timeout_ms, int *cached)
{
	struct child c = CHILD_INIT;
	struct strbuf dir = STRBUF_INIT;
	const char *py = python_torch(log);
	int ret;

	if (!py)
		return -2;
	strvec_pushl(&c.args, py, NULL);
	strvec_pushf(&c.args, "%s/python/ak_runner_triton.py", ak_datadir());
	strvec_push(&c.args, "--check");
	ret = object_path(so, &dir, log, status, &c.args, src, ".py", cached);
	if (ret || *cached)
		goto cleanup;
	strvec_push(&c.args, src);
	if (run_step(&c, log, status, timeout_ms) < 0) {
		ret = -1;
	} else if (store_copy(src, so->buf) < 0) {
		strbuf_addstr(status, "unable to store the kernel");
		ret = -1;
	}
cleanup:
	child_release(&c);
	strbuf_release(&dir);
	return ret;
}

int build_kernel(struct strbuf *so, struct strbuf *log, struct strbuf *status,
		 const char *backend, const char *src, const char *arch,
		 int timeout_ms, int *cached)
{
	struct child c = CHILD_INIT;
	struct cell cell = CELL_INIT;
	struct strbuf inc = STRBUF_INIT, dir = STRBUF_INIT, tmp = STRBUF_INIT;
	char *scratch = NULL;
	static int swept;
	int ret = 0;

	*cached = 0;
	if (!strcmp(backend, "triton"))
		return build_python(so, log, status, src, timeout_ms, cached);
	strbuf_addf(&inc, "%s/include", ak_datadir());
	compile_args(&c.args, backend, arch, inc.buf);
	ret = object_path(so, &dir, log, status, &c.args, src, ".so", cached);
	if (ret || *cached)
		goto cleanup;
	/* The compiler's files, the object among them, go to a private
	 * scratch directory, its TMPDIR, removed after (hipcc leaves an
	 * empty /tmp/kernel-* per build); the object is renamed into the
	 * cache, so concurrent builds never see a half-written one. */
	if (!swept++)
		tempdir_sweep(dir.buf);
	if (!(scratch = tempdir_make(dir.buf))) {
		ret = -2;
		goto cleanup;
	}
	strbuf_addf(&tmp, "%s/kernel.so", scratch);
	strvec_pushl(&c.args, "-o", tmp.buf, src, NULL);
	strvec_pushf(&c.env, "TMPDIR=%s", scratch);
	link_args(&c.args, backend);
	if (cell_enabled()) {
		build_cell(&cell, c.args.v[0], inc.buf, src, scratch);
		c.cell = &cell;
	}
	if (run_step(&c, log, status, timeout_ms) < 0) {
		ret = -1;
	} else if (rename(tmp.buf, so->buf) < 0) {
		ret = error_errno("unable to store '%s'", so->buf);
	}
	tempdir_remove(scratch);
cleanup:
	child_release(&c);
	cell_release(&cell);
	strbuf_release(&inc);
	strbuf_release(&dir);
	strbuf_release(&tmp);
	free(scratch);
	return ret;
}
