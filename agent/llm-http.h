/*
 * llm-http.h: asking a model for a reply over HTTP (libcurl): the two wire
 * formats, retries with backoff, and a transcript of every exchange.
 *
 * Providers (git-autokernel(1), CONFIGURATION): LLM_OPENAI is any OpenAI-compatible server,
 * POST <url>/chat/completions with "Authorization: Bearer KEY" (no header
 * without a key, for a local server); LLM_ANTHROPIC is the Messages API,
 * POST <url>/messages with x-api-key and anthropic-version.
 *
 *	struct llm_client c = LLM_CLIENT_INIT;
 *	c.cfg = ...;                            // llm.c fills it from config
 *	struct llm_prompt p = { system, user, stable };
 *	struct llm_answer ans = LLM_ANSWER_INIT;
 *	rc = llm_complete(&c, &p, ".../transcripts/softmax/3-", &ans, &why);
 *	// 0: ans.text holds the reply; 1: this experiment failed (why);
 *	// -1: stop the run (why names the HTTP status or the error)
 *	llm_answer_release(&ans);
 *	llm_client_release(&c);
 *
 * What is retried: 408, 429, 5xx, a connection error or a timeout, up to
 * cfg.retries times, waiting the server's Retry-After (capped) or an
 * exponential backoff with jitter from cfg.backoff_ms.  Stops the run at
 * once: 401, 403, 404 (the key, the URL or the model is wrong), a bad URL.
 * Fails the experiment only: 400 and other 4xx (with the server's
 * message), a malformed or oversized answer.  A 400 that says the model
 * wants max_completion_tokens instead of max_tokens, or takes no
 * temperature, is adapted to once and resent.
 *
 * Transcripts: each request writes <prefix><n>.json (n counting on from
 * the first number not yet taken, so nothing is overwritten): the
 * request (headers, body), the response (status, headers, body), the
 * error and the timing, with the key replaced by "<redacted>".  Messages
 * in why are redacted too.  The key never leaves this module except in
 * the request headers.
 */
#ifndef LLM_HTTP_H
#define LLM_HTTP_H

#include <stdint.h>
#include <jansson.h>
#include "lib/strbuf.h"

#define LLM_BODY_MAX (8L * 1024 * 1024)         /* an answer's bytes */
#define LLM_RETRY_AFTER_CAP_MS 120000L
#define LLM_BACKOFF_CAP_MS 60000L

enum llm_provider { LLM_OPENAI, LLM_ANTHROPIC };

struct llm_config {
	enum llm_provider provider;
	char *url;                      /* base, with /v1, no trailing '/' */
	char *model;
	char *key;                      /* NULL: send none */
	double temperature;             /* < 0: not sent */
	int max_tokens;
	int timeout_s;                  /* per request */
	int retries;
	long backoff_ms;                /* the first retry's mean wait */
	int max_completion_tokens;      /* send that name instead */
};

struct llm_client {
	struct llm_config cfg;
	void *curl;                     /* kept, so connections are reused */
	uint64_t rng;
	long long deadline_ns;          /* now_ns() clock; 0: none */
	int quiet;                      /* no retry notes on stderr */
};
#define LLM_CLIENT_INIT { .cfg = { .temperature = -1 } }
void llm_client_release(struct llm_client *c);

struct llm_prompt {
	const char *system, *user;
	/* The first bytes of user that are the same in every request of a
	 * run: Anthropic is asked to cache them (OpenAI caches a repeated
	 * prefix by itself).  0: nothing marked. */
	size_t stable;
};

struct llm_answer {
	struct strbuf text;             /* the model's reply */
	struct strbuf model;            /* as the server names it */
	long long in_tokens, out_tokens;
	int truncated;                  /* it stopped at its token limit */
	int requests;
	double seconds;
};
#define LLM_ANSWER_INIT { STRBUF_INIT, STRBUF_INIT, 0, 0, 0, 0, 0 }
void llm_answer_release(struct llm_answer *a);

const char *llm_provider_name(enum llm_provider p);

/* transcript: a path prefix, or NULL for none. */
int llm_complete(struct llm_client *c, const struct llm_prompt *p,
		 const char *transcript, struct llm_answer *ans,
		 struct strbuf *why);

/* ---- the pure parts, for tests/unit-llm.c ---- */

/* The request body for cfg's provider. */
json_t *llm_request_body(const struct llm_config *cfg,
			 const struct llm_prompt *p);
/* Adds a 2xx answer's text, tokens, model and truncation to ans; 0, or 1
 * with why (malformed JSON, no choices, a refusal). */
int llm_response_parse(const struct llm_config *cfg, const char *body,
		       size_t len, struct llm_answer *ans, struct strbuf *why);
/* The message of an error answer (error.message, message, detail, or the
 * first line of a text body), at most 300 bytes, into out. */
void llm_error_message(struct strbuf *out, const char *body, size_t len);
/* Retry-After: delay-seconds or an HTTP-date, against now (Unix seconds);
 * milliseconds, capped at LLM_RETRY_AFTER_CAP_MS, or -1 if none. */
long llm_retry_after_ms(const char *value, long long now);
/* The wait before retry number retry (1-based): base * 2^(retry-1),
 * capped at LLM_BACKOFF_CAP_MS, with "equal jitter" from rnd: half fixed,
 * half random. */
long llm_backoff_ms(long base_ms, int retry, uint64_t rnd);
/* "Too Many Requests" for 429, "" when unknown. */
const char *llm_status_reason(long status);

#endif
