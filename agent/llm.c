/*
 * llm.c: the llm agent.  Each experiment sends the prompt (prompt.c) to a
 * model over HTTP (llm-http.c), turns the reply into the new kernel file
 * and a hypothesis (llm-reply.c), and writes the file; the loop commits it
 * and the hooks judge it.
 *
 * Configuration (git config; git-autokernel(1), CONFIGURATION):
 *
 *	autokernel.llm.provider     openai (any OpenAI-compatible server) or
 *				    anthropic; default openai
 *	autokernel.llm.url          base URL including /v1; default the
 *				    provider's own
 *	autokernel.llm.model        required
 *	autokernel.llm.temperature  default 0.7; negative: not sent
 *	autokernel.llm.maxTokens    default 16000
 *	autokernel.llm.timeout      seconds per request, default 300
 *	autokernel.llm.retries      default 6
 *
 * The key comes only from the environment: AUTOKERNEL_API_KEY, else
 * OPENAI_API_KEY or ANTHROPIC_API_KEY.  It is required by the providers'
 * own hosts only, so a local server (Ollama, llama.cpp, vLLM) needs none.
 * AUTOKERNEL_LLM_BACKOFF_MS sets the first retry's mean wait (tests).
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "agent/agent.h"
#include "agent/llm-http.h"
#include "agent/llm-reply.h"
#include "lib/paths.h"
#include "lib/repo.h"
#include "lib/run.h"

/* Experiments in a row the server refuses with a 4xx before the run
 * stops: the same request shape would be refused forever. */
#define LLM_MAX_REFUSED 3

struct llm {
	struct llm_client c;
	struct strbuf init_error;       /* why init failed, for propose */
	int ready;
	int refused;                    /* consecutive 4xx experiments */
	struct strbuf discarded;        /* why the last reply was unusable */
};

static const char *default_url(enum llm_provider p)
{
	return p == LLM_ANTHROPIC ? "https://api.anthropic.com/v1" :
		"https://api.openai.com/v1";
}

/* Whether url's host is one of the hosted APIs, which need a key. */
static int hosted(const char *url)
{
	const char *h = strstr(url, "://");
	size_t n;

	h = h ? h + 3 : url;
	n = strcspn(h, ":/?#");
	return (n == 14 && !strncasecmp(h, "api.openai.com", n)) ||
		(n == 17 && !strncasecmp(h, "api.anthropic.com", n));
}

static char *env_key(enum llm_provider p)
{
	const char *names[] = { "AUTOKERNEL_API_KEY", p == LLM_ANTHROPIC ?
				"ANTHROPIC_API_KEY" : "OPENAI_API_KEY" };

	for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
		const char *v = getenv(names[i]);

		if (v && *v)
			return xstrdup(v);
	}
	return NULL;
}

static int load_config(struct llm *l, struct strbuf *err)
{
	struct llm_config *cfg = &l->c.cfg;
	char *provider = config_string("autokernel.llm.provider", "openai");
	const char *backoff = getenv("AUTOKERNEL_LLM_BACKOFF_MS");
	size_t n;
	int ret = -1;

	if (!strcmp(provider, "openai")) {
		cfg->provider = LLM_OPENAI;
	} else if (!strcmp(provider, "anthropic")) {
		cfg->provider = LLM_ANTHROPIC;
	} else {
		strbuf_addf(err, "unknown autokernel.llm.provider '%s' (openai "
			    "or anthropic)", provider);
		goto cleanup;
	}
	cfg->url = config_string("autokernel.llm.url",
				 default_url(cfg->provider));
	n = strlen(cfg->url);
	while (n && cfg->url[n - 1] == '/')
		cfg->url[--n] = '\0';
	cfg->model = config_string("autokernel.llm.model", NULL);
	if (!cfg->model || !*cfg->model) {
		strbuf_addstr(err, "no model: set autokernel.llm.model (git "
			      "config autokernel.llm.model NAME)");
		goto cleanup;
	}
	cfg->temperature = config_double("autokernel.llm.temperature", 0.7);
	cfg->max_tokens = config_int("autokernel.llm.maxTokens", 16000);
	cfg->timeout_s = config_int("autokernel.llm.timeout", 300);
	cfg->retries = config_int("autokernel.llm.retries", 6);
	cfg->backoff_ms = backoff && *backoff ? atol(backoff) : 1000;
	if (cfg->max_tokens <= 0 || cfg->timeout_s <= 0 || cfg->retries < 0) {
		strbuf_addstr(err, "autokernel.llm.maxTokens and "
			      "autokernel.llm.timeout must be positive, "
			      "autokernel.llm.retries not negative");
		goto cleanup;
	}
	cfg->key = env_key(cfg->provider);
	if (!cfg->key && hosted(cfg->url)) {
		strbuf_addf(err, "no API key for %s: set AUTOKERNEL_API_KEY or "
			    "%s in the environment", cfg->url,
			    cfg->provider == LLM_ANTHROPIC ?
			    "ANTHROPIC_API_KEY" : "OPENAI_API_KEY");
		goto cleanup;
	}
	ret = 0;
cleanup:
	free(provider);
	return ret;
}

static int llm_init(struct agent *a, int argc, char **argv)
{
	struct llm *l = a->data;

	(void)argv;
	if (argc > 0) {
		strbuf_addstr(&l->init_error, "the llm agent takes no command; "
			      "it is set up with autokernel.llm.* (see "
			      "git-autokernel(1))");
		return error("%s", l->init_error.buf);
	}
	if (load_config(l, &l->init_error) < 0)
		return error("%s", l->init_error.buf);
	l->ready = 1;
	return 0;
}

static void system_prompt(struct strbuf *sb, const struct agent_context *ctx)
{
	const char *lang = fence_lang(ctx->kernel_rel);

	strbuf_addf(sb,
"You are an expert performance engineer for %s kernels (CUDA, HIP, CPU "
"SIMD) working in an automated optimization loop. Each turn you propose one "
"experiment: one focused change to the kernel file %s, with a hypothesis. "
"A harness builds your file, checks every output against an fp64 reference "
"in five stages, and times it against the current best; it is kept only if "
"it is correct and measurably faster. The history shows what was kept and "
"what was rejected and why: build on what worked, do not repeat what "
"failed unless you fix the reason it failed.\n\n"
"Reply format (strict; a reply that breaks it is discarded):\n"
"1. First line: the hypothesis, one plain sentence under 150 characters: "
"what you change and why it should be faster. It becomes the commit "
"subject. Example: \"Two rows per warp with 16-byte loads to double the "
"bytes in flight per SM\".\n"
"2. Then, if useful, a few sentences of reasoning (no more than 10 "
"lines).\n"
"3. Last: the whole new %s in one fenced code block (```%s ... ```): "
"complete and compilable, every include, helper and ak_kernel(), nothing "
"elided (no \"...\" or \"rest unchanged\"). Not a diff. Nothing after "
"the block.\n"
"For a small change to a long file you may instead end with one or more "
"SEARCH/REPLACE blocks, each in a fenced block:\n"
"<<<<<<< SEARCH\n(lines copied exactly from the current file, enough to "
"match one place)\n=======\n(the lines that replace them)\n"
">>>>>>> REPLACE\n\n"
"Rules: edit only %s; keep the ABI of include/autokernel.h; no vendor "
"libraries, no device allocation (use the workspace), no host "
"synchronization; write every output element, never the inputs; results "
"must be bitwise deterministic run to run; every dtype and shape the "
"problem lists must work, odd and tiny ones too. Never special-case the "
"benchmark to skip work or reuse results across calls: inputs rotate "
"between timed calls and a time faster than the device can move the "
"bytes or do the flops is rejected as impossible.\n",
		    ctx->p->backend, ctx->kernel_rel, ctx->kernel_rel, lang,
		    ctx->kernel_rel);
}

static void user_prompt(struct strbuf *sb, const struct agent_context *ctx,
			const struct strbuf *discarded)
{
	prompt_build(sb, ctx, 1);
	/* the loop keeps no record of a reply that changed nothing */
	if (discarded->len)
		strbuf_addf(sb, "\n## Your previous reply was discarded\n\n"
			    "%s.\n", discarded->buf);
	strbuf_addf(sb, "\n# Your reply\n\nThe hypothesis on the first line; "
		    "then the whole new %s in one ```%s fenced block (or "
		    "SEARCH/REPLACE blocks), and nothing after it.\n",
		    ctx->kernel_rel, fence_lang(ctx->kernel_rel));
}

static void transcript_prefix(struct strbuf *sb,
			      const struct agent_context *ctx)
{
	strbuf_addf(sb, "%s/transcripts/%s", repo_autokernel_dir(), ctx->name);
	if (mkdir_p(sb->buf) < 0) {
		strbuf_reset(sb);
		return;
	}
	strbuf_addf(sb, "/%d-", ctx->experiment);
}

static json_t *usage(const struct llm *l, const struct llm_answer *ans)
{
	return json_pack("{s:I,s:I,s:s,s:s,s:i,s:f}",
			 "input", (json_int_t)ans->in_tokens,
			 "output", (json_int_t)ans->out_tokens,
			 "model", ans->model.len ? ans->model.buf :
			 l->c.cfg.model,
			 "provider", llm_provider_name(l->c.cfg.provider),
			 "requests", ans->requests,
			 "seconds", ans->seconds);
}

/* The prompt as sent, for a person to read (never the key). */
static void save_prompt(const struct agent_context *ctx,
			const struct strbuf *system, const struct strbuf *user)
{
	struct strbuf sb = STRBUF_INIT;

	if (!ctx->prompt_path)
		return;
	strbuf_addf(&sb, "# System\n\n%s\n%s", system->buf, user->buf);
	write_file_atomic(ctx->prompt_path, sb.buf, sb.len);
	strbuf_release(&sb);
}

/* The reply -> the kernel file; 0, or 1 with pr->failure. */
static int apply_reply(const struct agent_context *ctx,
		       const struct llm_answer *ans, const char *current,
		       struct proposal *pr)
{
	struct llm_edit e = LLM_EDIT_INIT;
	int ret = 1;

	if (llm_reply_parse(&e, ans->text.buf, ans->text.len, ctx->kernel_rel,
			    current, ans->truncated, &pr->failure))
		goto cleanup;
	if (write_file_atomic(ctx->kernel_path, e.kernel.buf, e.kernel.len)) {
		strbuf_addf(&pr->failure, "unable to write '%s'",
			    ctx->kernel_rel);
		goto cleanup;
	}
	strbuf_addbuf(&pr->hypothesis, &e.hypothesis);
	ret = 0;
cleanup:
	llm_edit_release(&e);
	return ret;
}

static int llm_propose(struct agent *a, const struct agent_context *ctx,
		       struct proposal *pr)
{
	struct llm *l = a->data;
	struct strbuf system = STRBUF_INIT, user = STRBUF_INIT;
	struct strbuf current = STRBUF_INIT, prefix = STRBUF_INIT;
	struct llm_answer ans = LLM_ANSWER_INIT;
	struct llm_prompt prompt;
	const char *stable;
	int rc;

	if (!l->ready) {
		strbuf_addbuf(&pr->failure, &l->init_error);
		return -1;
	}
	if (strbuf_read_file(&current, ctx->kernel_path) < 0) {
		strbuf_addf(&pr->failure, "unable to read '%s'",
			    ctx->kernel_rel);
		rc = -1;
		goto cleanup;
	}
	system_prompt(&system, ctx);
	user_prompt(&user, ctx, &l->discarded);
	llm_redact(&system, l->c.cfg.key);
	llm_redact(&user, l->c.cfg.key);
	llm_utf8_fix(&user);
	transcript_prefix(&prefix, ctx);
	save_prompt(ctx, &system, &user);
	l->c.deadline_ns = ctx->timeout_ms > 0 ?
		now_ns() + (long long)ctx->timeout_ms * 1000000 : 0;
	prompt.system = system.buf;
	prompt.user = user.buf;
	/* what prompt.c puts before the branch's state does not change
	 * from one experiment to the next */
	stable = strstr(user.buf, "\n## Where the kernel stands");
	prompt.stable = stable ? (size_t)(stable - user.buf) + 1 : 0;
	rc = llm_complete(&l->c, &prompt, prefix.len ? prefix.buf : NULL,
			  &ans, &pr->failure);
	if (ans.requests)
		pr->usage = usage(l, &ans);
	if (rc == 1 && starts_with(pr->failure.buf, "HTTP 4")) {
		if (++l->refused >= LLM_MAX_REFUSED) {
			struct strbuf head = STRBUF_INIT;

			strbuf_addf(&head, "giving up after %d requests in a "
				    "row refused: ", l->refused);
			strbuf_insert_front(&pr->failure, head.buf);
			strbuf_release(&head);
			rc = -1;
		}
	} else {
		l->refused = 0;
	}
	if (rc == 0)
		rc = apply_reply(ctx, &ans, current.buf, pr);
	llm_redact(&pr->failure, l->c.cfg.key);
	llm_redact(&pr->hypothesis, l->c.cfg.key);
	strbuf_reset(&l->discarded);
	if (rc == 1 && ans.text.len)
		strbuf_addbuf(&l->discarded, &pr->failure);
cleanup:
	llm_answer_release(&ans);
	strbuf_release(&system);
	strbuf_release(&user);
	strbuf_release(&current);
	strbuf_release(&prefix);
	return rc;
}

static void llm_release(struct agent *a)
{
	struct llm *l = a->data;

	if (!l)
		return;
	llm_client_release(&l->c);
	strbuf_release(&l->init_error);
	strbuf_release(&l->discarded);
	free(l);
	a->data = NULL;
}

struct agent *agent_llm_new(void)
{
	struct agent *a = xcalloc(1, sizeof(*a));
	struct llm *l = xcalloc(1, sizeof(*l));

	l->c = (struct llm_client)LLM_CLIENT_INIT;
	strbuf_init(&l->init_error, 0);
	strbuf_init(&l->discarded, 0);
	a->name = "llm";
	a->init = llm_init;
	a->propose = llm_propose;
	a->release = llm_release;
	a->data = l;
	return a;
}
