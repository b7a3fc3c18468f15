/*
 * llm-http.c: the model's HTTP side.  What is retried and what stops the
 * run is in llm-http.h.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <curl/curl.h>
#include "agent/llm-http.h"
#include "agent/llm-reply.h"
#include "lib/run.h"

#ifndef AK_VERSION
#define AK_VERSION "dev"
#endif

/* One request and what came back. */
struct exchange {
	long status;                    /* 0: no HTTP answer */
	struct strbuf reason;           /* the status line's phrase */
	struct strbuf headers;          /* response header lines */
	struct strbuf body;
	long retry_after_ms;            /* -1: none */
	int rc;                         /* CURLcode */
	char errbuf[CURL_ERROR_SIZE];
	size_t received;
	int too_large;
	double seconds;
	long long started;              /* Unix seconds */
};

enum outcome { DONE, FAILED, STOP, RETRY, RESEND };

const char *llm_provider_name(enum llm_provider p)
{
	return p == LLM_ANTHROPIC ? "anthropic" : "openai";
}

void llm_client_release(struct llm_client *c)
{
	if (c->curl)
		curl_easy_cleanup(c->curl);
	c->curl = NULL;
	free(c->cfg.url);
	free(c->cfg.model);
	free(c->cfg.key);
	c->cfg.url = c->cfg.model = c->cfg.key = NULL;
}

void llm_answer_release(struct llm_answer *a)
{
	strbuf_release(&a->text);
	strbuf_release(&a->model);
}

const char *llm_status_reason(long status)
{
	switch (status) {
	case 400: return "Bad Request";
	case 401: return "Unauthorized";
	case 402: return "Payment Required";
	case 403: return "Forbidden";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 408: return "Request Timeout";
	case 409: return "Conflict";
	case 413: return "Payload Too Large";
	case 422: return "Unprocessable Entity";
	case 429: return "Too Many Requests";
	case 500: return "Internal Server Error";
	case 502: return "Bad Gateway";
	case 503: return "Service Unavailable";
	case 504: return "Gateway Timeout";
	case 529: return "Overloaded";
	default: return "";
	}
}

/* ---- pure parts ---- */

long llm_backoff_ms(long base_ms, int retry, uint64_t rnd)
{
	long d = base_ms > 0 ? base_ms : 0;

	for (int i = 1; i < retry && d < LLM_BACKOFF_CAP_MS; i++)
		d *= 2;
	if (d > LLM_BACKOFF_CAP_MS)
		d = LLM_BACKOFF_CAP_MS;
	/* half of it fixed, half random: spreads clients that failed
	 * together without ever retrying at once */
	return d / 2 + (long)(rnd % (uint64_t)(d - d / 2 + 1));
}

long llm_retry_after_ms(const char *value, long long now)
{
	char *end;
	double s;
	time_t t;

	if (!value)
		return -1;
	while (isspace((unsigned char)*value))
		value++;
	if (!*value)
		return -1;
	if (isdigit((unsigned char)*value)) {
		s = strtod(value, &end);
		while (isspace((unsigned char)*end))
			end++;
		if (!*end && s >= 0)
			return s * 1000 > LLM_RETRY_AFTER_CAP_MS ?
				LLM_RETRY_AFTER_CAP_MS : (long)(s * 1000);
	}
	t = curl_getdate(value, NULL);
	if (t == (time_t)-1)
		return -1;
	if ((long long)t <= now)
		return 0;
	if ((long long)t - now > LLM_RETRY_AFTER_CAP_MS / 1000)
		return LLM_RETRY_AFTER_CAP_MS;
	return (long)((long long)t - now) * 1000;
}

/* Anthropic's user content: the stable part marked for the prompt cache,
 * then the rest. */
static json_t *anthropic_content(const struct llm_prompt *p)
{
	size_t len = strlen(p->user);

	if (!p->stable || p->stable >= len)
		return json_string(p->user);
	return json_pack("[{s:s,s:s%,s:{s:s}},{s:s,s:s}]", "type", "text",
			 "text", p->user, p->stable, "cache_control", "type",
			 "ephemeral", "type", "text", "text",
			 p->user + p->stable);
}

json_t *llm_request_body(const struct llm_config *cfg,
			 const struct llm_prompt *p)
{
	json_t *b;

	if (cfg->provider == LLM_ANTHROPIC)
		b = json_pack("{s:s,s:s,s:[{s:s,s:o}],s:i}", "model",
			      cfg->model, "system", p->system, "messages",
			      "role", "user", "content", anthropic_content(p),
			      "max_tokens", cfg->max_tokens);
	else
		b = json_pack("{s:s,s:[{s:s,s:s},{s:s,s:s}],s:i}", "model",
			      cfg->model, "messages", "role", "system",
			      "content", p->system, "role", "user", "content",
			      p->user, cfg->max_completion_tokens ?
			      "max_completion_tokens" : "max_tokens",
			      cfg->max_tokens);
	if (b && cfg->temperature >= 0)
		json_object_set_new(b, "temperature",
				    json_real(cfg->temperature));
	return b;
}

void llm_error_message(struct strbuf *out, const char *body, size_t len)
{
	json_t *j = json_loadb(body, len, 0, NULL), *e;
	const char *m = NULL;

	strbuf_reset(out);
	if (j) {
		e = json_object_get(j, "error");
		m = json_string_value(json_object_get(e, "message"));
		if (!m)
			m = json_string_value(e);
		if (!m)
			m = json_string_value(json_object_get(j, "message"));
		if (!m)
			m = json_string_value(json_object_get(j, "detail"));
		if (m)
			strbuf_addstr(out, m);
		json_decref(j);
	} else if (len && body[0] != '<') {       /* not an HTML page */
		strbuf_add(out, body, strcspn(body, "\n") < len ?
			   strcspn(body, "\n") : len);
	}
	for (size_t i = 0; i < out->len; i++)
		if ((unsigned char)out->buf[i] < 0x20)
			out->buf[i] = ' ';
	strbuf_trim(out);
	if (out->len > 300) {
		strbuf_setlen(out, 297);
		strbuf_addstr(out, "...");
	}
}

static void add_content(struct strbuf *text, json_t *content)
{
	size_t i;
	json_t *part;

	if (json_is_string(content)) {
		strbuf_addstr(text, json_string_value(content));
		return;
	}
	/* an array of parts: Anthropic's content, some OpenAI servers */
	json_array_foreach(content, i, part) {
		const char *type = json_string_value(json_object_get(part,
								     "type"));
		const char *t = json_string_value(json_object_get(part,
								  "text"));

		if (t && (!type || !strcmp(type, "text") ||
			  !strcmp(type, "output_text")))
			strbuf_addstr(text, t);
	}
}

static long long tokens(json_t *usage, const char *key)
{
	return json_integer_value(json_object_get(usage, key));
}

static int parse_openai(json_t *j, struct llm_answer *ans, struct strbuf *why)
{
	json_t *choice = json_array_get(json_object_get(j, "choices"), 0);
	json_t *msg = json_object_get(choice, "message");
	json_t *usage = json_object_get(j, "usage");
	const char *finish = json_string_value(
		json_object_get(choice, "finish_reason"));

	ans->in_tokens += tokens(usage, "prompt_tokens");
	ans->out_tokens += tokens(usage, "completion_tokens");
	if (!msg) {
		strbuf_addstr(why, "the server's answer has no choices[0]."
			      "message");
		return 1;
	}
	if (json_string_value(json_object_get(msg, "refusal"))) {
		strbuf_addf(why, "the model refused: %s", json_string_value(
			json_object_get(msg, "refusal")));
		return 1;
	}
	add_content(&ans->text, json_object_get(msg, "content"));
	ans->truncated = finish && !strcmp(finish, "length");
	return 0;
}

static int parse_anthropic(json_t *j, struct llm_answer *ans,
			   struct strbuf *why)
{
	json_t *usage = json_object_get(j, "usage");
	json_t *content = json_object_get(j, "content");
	const char *stop = json_string_value(json_object_get(j, "stop_reason"));

	/* input_tokens leaves out what was read from or written to the
	 * prompt cache; all of it was sent */
	ans->in_tokens += tokens(usage, "input_tokens") +
		tokens(usage, "cache_read_input_tokens") +
		tokens(usage, "cache_creation_input_tokens");
	ans->out_tokens += tokens(usage, "output_tokens");
	if (!json_is_array(content)) {
		strbuf_addstr(why, "the server's answer has no content[]");
		return 1;
	}
	add_content(&ans->text, content);
	ans->truncated = stop && !strcmp(stop, "max_tokens");
	if (stop && !strcmp(stop, "refusal") && !ans->text.len) {
		strbuf_addstr(why, "the model refused");
		return 1;
	}
	return 0;
}

int llm_response_parse(const struct llm_config *cfg, const char *body,
		       size_t len, struct llm_answer *ans, struct strbuf *why)
{
	json_error_t err;
	json_t *j = json_loadb(body, len, 0, &err);
	int ret;

	if (!j) {
		strbuf_addf(why, "malformed JSON in the server's answer: %s "
			    "(line %d)", err.text, err.line);
		return 1;
	}
	if (!json_is_object(j)) {
		strbuf_addstr(why, "the server's answer is not a JSON object");
		json_decref(j);
		return 1;
	}
	if (json_string_value(json_object_get(j, "model"))) {
		strbuf_reset(&ans->model);
		strbuf_addstr(&ans->model, json_string_value(
			json_object_get(j, "model")));
	}
	if (cfg->provider == LLM_ANTHROPIC)
		ret = parse_anthropic(j, ans, why);
	else
		ret = parse_openai(j, ans, why);
	json_decref(j);
	return ret;
}

/* ---- the transport ---- */

static size_t on_body(char *data, size_t size, size_t n, void *p)
{
	struct exchange *ex = p;

	ex->received += size * n;
	if (ex->body.len + size * n > (size_t)LLM_BODY_MAX) {
		ex->too_large = 1;
		return 0;       /* aborts the transfer */
	}
	strbuf_add(&ex->body, data, size * n);
	return size * n;
}

static const char *header_value(const char *line, size_t len,
				const char *name, struct strbuf *out)
{
	size_t nl = strlen(name);

	if (len <= nl || strncasecmp(line, name, nl) || line[nl] != ':')
		return NULL;
	strbuf_reset(out);
	strbuf_add(out, line + nl + 1, len - nl - 1);
	strbuf_trim(out);
	return out->buf;
}

static size_t on_header(char *data, size_t size, size_t n, void *p)
{
	struct exchange *ex = p;
	struct strbuf v = STRBUF_INIT;
	size_t len = size * n, l = len;

	while (l && (data[l - 1] == '\n' || data[l - 1] == '\r'))
		l--;
	if (l >= 5 && !strncmp(data, "HTTP/", 5)) {
		/* a new response (after a 100 Continue, say) */
		const char *sp = memchr(data, ' ', l);

		strbuf_reset(&ex->headers);
		strbuf_reset(&ex->reason);
		ex->retry_after_ms = -1;
		sp = sp ? memchr(sp + 1, ' ', l - (sp + 1 - data)) : NULL;
		if (sp)
			strbuf_add(&ex->reason, sp + 1, l - (sp + 1 - data));
	} else if (header_value(data, l, "retry-after-ms", &v)) {
		double ms = strtod(v.buf, NULL);

		if (ms >= 0)
			ex->retry_after_ms = ms > LLM_RETRY_AFTER_CAP_MS ?
				LLM_RETRY_AFTER_CAP_MS : (long)ms;
	} else if (header_value(data, l, "retry-after", &v) &&
		   ex->retry_after_ms < 0) {
		ex->retry_after_ms = llm_retry_after_ms(v.buf, time(NULL));
	}
	if (l) {
		strbuf_add(&ex->headers, data, l);
		strbuf_addch(&ex->headers, '\n');
	}
	strbuf_release(&v);
	return len;
}

static int on_progress(void *p, curl_off_t dt, curl_off_t dn, curl_off_t ut,
		       curl_off_t un)
{
	(void)p, (void)dt, (void)dn, (void)ut, (void)un;
	return run_interrupted != 0;
}

static void endpoint(struct strbuf *url, const struct llm_config *cfg)
{
	strbuf_addstr(url, cfg->url);
	strbuf_addstr(url, cfg->provider == LLM_ANTHROPIC ? "/messages" :
		      "/chat/completions");
}

/* The request headers; shown: the same with the key as "<redacted>". */
static struct curl_slist *headers(const struct llm_config *cfg,
				  json_t *shown)
{
	struct curl_slist *h = NULL;
	struct strbuf sb = STRBUF_INIT;
	const char *name = cfg->provider == LLM_ANTHROPIC ? "x-api-key" :
		"Authorization";
	const char *scheme = cfg->provider == LLM_ANTHROPIC ? "" : "Bearer ";
	const char *fixed[] = {
		"Content-Type: application/json", "Accept: application/json",
		"Expect:", cfg->provider == LLM_ANTHROPIC ?
		"anthropic-version: 2023-06-01" : NULL, NULL
	};

	for (int i = 0; fixed[i]; i++) {
		h = curl_slist_append(h, fixed[i]);
		json_array_append_new(shown, json_string(fixed[i]));
	}
	if (cfg->key) {
		strbuf_addf(&sb, "%s: %s%s", name, scheme, cfg->key);
		h = curl_slist_append(h, sb.buf);
		strbuf_reset(&sb);
		strbuf_addf(&sb, "%s: %s<redacted>", name, scheme);
		json_array_append_new(shown, json_string(sb.buf));
	}
	strbuf_release(&sb);
	return h;
}

static void perform(struct llm_client *c, const char *url, const char *body,
		    struct curl_slist *hdr, long timeout_ms,
		    struct exchange *ex)
{
	CURL *curl = c->curl;
	long long t0 = now_ns();

	curl_easy_reset(curl);
	curl_easy_setopt(curl, CURLOPT_URL, url);
#if LIBCURL_VERSION_NUM >= 0x075500
	curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
#endif
	curl_easy_setopt(curl, CURLOPT_POST, 1L);
	curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE,
			 (curl_off_t)strlen(body));
	curl_easy_setopt(curl, CURLOPT_HTTPHEADER, hdr);
	curl_easy_setopt(curl, CURLOPT_USERAGENT, "git-autokernel/" AK_VERSION);
	curl_easy_setopt(curl, CURLOPT_ACCEPT_ENCODING, "");
	curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(curl, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, timeout_ms);
	curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS,
			 timeout_ms < 30000 ? timeout_ms : 30000L);
	curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(curl, CURLOPT_WRITEDATA, ex);
	curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(curl, CURLOPT_HEADERDATA, ex);
	curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, on_progress);
	curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, ex->errbuf);
	ex->errbuf[0] = '\0';
	ex->started = time(NULL);
	ex->rc = curl_easy_perform(curl);
	curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &ex->status);
	ex->seconds = (now_ns() - t0) / 1e9;
	if (!ex->reason.len)
		strbuf_addstr(&ex->reason, llm_status_reason(ex->status));
}

/* ---- transcripts ---- */

static void save_transcript(const struct llm_client *c, const char *prefix,
			    int n, const char *url, json_t *req, json_t *shown,
			    const struct exchange *ex, const char *error)
{
	struct strbuf path = STRBUF_INIT, text = STRBUF_INIT;
	json_t *t, *body, *hl;
	const char *h = ex->headers.buf;
	char *dump;

	if (!prefix)
		return;
	hl = json_array();
	while (*h) {
		size_t l = strcspn(h, "\n");

		json_array_append_new(hl, json_stringn(h, l));
		h += l + (h[l] == '\n');
	}
	body = json_loadb(ex->body.buf, ex->body.len, 0, NULL);
	if (!body)
		body = json_stringn(ex->body.buf, ex->body.len);
	t = json_pack("{s:i,s:s,s:s,s:I,s:f,s:{s:s,s:O,s:O},"
		      "s:{s:i,s:s,s:o,s:o}}", "request_number", n,
		      "provider", llm_provider_name(c->cfg.provider),
		      "model", c->cfg.model,
		      "started", (json_int_t)ex->started,
		      "seconds", ex->seconds,
		      "request", "url", url, "headers", shown, "body", req,
		      "response", "status", (int)ex->status,
		      "reason", ex->reason.buf, "headers", hl, "body",
		      body ? body : json_null());
	json_object_set_new(t, "error", error && *error ?
			    json_string(error) : json_null());
	dump = t ? json_dumps(t, JSON_INDENT(2) | JSON_ENSURE_ASCII) : NULL;
	if (dump) {
		strbuf_addstr(&text, dump);
		strbuf_addch(&text, '\n');
		llm_redact(&text, c->cfg.key);
		strbuf_addf(&path, "%s%d.json", prefix, n);
		write_file_atomic(path.buf, text.buf, text.len);
	}
	free(dump);
	json_decref(t);
	strbuf_release(&path);
	strbuf_release(&text);
}

/* ---- deciding ---- */

static void status_line(struct strbuf *sb, const struct exchange *ex)
{
	struct strbuf msg = STRBUF_INIT;

	strbuf_addf(sb, "HTTP %ld", ex->status);
	if (ex->reason.len)
		strbuf_addf(sb, " %s", ex->reason.buf);
	llm_error_message(&msg, ex->body.buf, ex->body.len);
	if (msg.len)
		strbuf_addf(sb, ": %s", msg.buf);
	strbuf_release(&msg);
}

static enum outcome transport_error(const char *url,
				    const struct exchange *ex,
				    struct strbuf *last, struct strbuf *why)
{
	const char *e = ex->errbuf[0] ? ex->errbuf :
		curl_easy_strerror((CURLcode)ex->rc);
	char size[32];

	if (ex->too_large) {
		llm_human_size(size, sizeof(size), ex->received);
		strbuf_addf(why, "reply of over %s is over the %d KB limit",
			    size, LLM_REPLY_MAX / 1024);
		return FAILED;
	}
	if (ex->rc == CURLE_ABORTED_BY_CALLBACK) {
		strbuf_addstr(why, "interrupted");
		return STOP;
	}
	switch (ex->rc) {
	case CURLE_UNSUPPORTED_PROTOCOL:
	case CURLE_URL_MALFORMAT:
	case CURLE_PEER_FAILED_VERIFICATION:
	case CURLE_SSL_CERTPROBLEM:
	case CURLE_SSL_CACERT_BADFILE:
		strbuf_addf(why, "unable to use '%s' (autokernel.llm.url): %s",
			    url, e);
		return STOP;
	case CURLE_OPERATION_TIMEDOUT:
		strbuf_reset(last);
		strbuf_addf(last, "no answer from '%s' within %.0f s", url,
			    ex->seconds);
		return RETRY;
	default:
		strbuf_reset(last);
		strbuf_addf(last, "unable to reach '%s': %s", url, e);
		return RETRY;
	}
}

/* A 400 that names a parameter this model does not take: change it and
 * send again (once each). */
static int adapt(struct llm_client *c, const char *msg)
{
	if (c->cfg.provider != LLM_OPENAI)
		return 0;
	if (!c->cfg.max_completion_tokens &&
	    strstr(msg, "max_completion_tokens")) {
		c->cfg.max_completion_tokens = 1;
		return 1;
	}
	if (c->cfg.temperature >= 0 && strstr(msg, "temperature")) {
		c->cfg.temperature = -1;
		return 1;
	}
	return 0;
}

static enum outcome decide(struct llm_client *c, const char *url,
			   const struct exchange *ex, struct llm_answer *ans,
			   struct strbuf *last, struct strbuf *why)
{
	struct strbuf msg = STRBUF_INIT;
	long s = ex->status;
	enum outcome o;

	if (ex->rc != CURLE_OK)
		return transport_error(url, ex, last, why);
	if (s >= 200 && s < 300)
		return llm_response_parse(&c->cfg, ex->body.buf, ex->body.len,
					  ans, why) ? FAILED : DONE;
	if (s == 408 || s == 429 || s >= 500 || s < 200) {
		strbuf_reset(last);
		status_line(last, ex);
		return RETRY;
	}
	llm_error_message(&msg, ex->body.buf, ex->body.len);
	if (s == 400 && adapt(c, msg.buf)) {
		o = RESEND;
	} else if (s == 401 || s == 403 || s == 407) {
		status_line(why, ex);
		strbuf_addstr(why, " (check the API key in "
			      "AUTOKERNEL_API_KEY)");
		o = STOP;
	} else if (s == 404 || s == 405 || s < 400) {
		status_line(why, ex);
		strbuf_addf(why, " (check autokernel.llm.url '%s' and "
			    "autokernel.llm.model '%s')", c->cfg.url,
			    c->cfg.model);
		o = STOP;
	} else {
		strbuf_addf(why, "HTTP %ld: %s", s, msg.len ? msg.buf :
			    llm_status_reason(s));
		o = FAILED;
	}
	strbuf_release(&msg);
	return o;
}

static uint64_t next_random(struct llm_client *c)
{
	uint64_t z;

	if (!c->rng)
		c->rng = (uint64_t)now_ns() ^ ((uint64_t)getpid() << 32);
	z = (c->rng += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static void sleep_ms(long ms)
{
	while (ms > 0 && !run_interrupted) {
		long slice = ms < 100 ? ms : 100;
		struct timespec ts = { slice / 1000,
				       (slice % 1000) * 1000000L };

		nanosleep(&ts, NULL);
		ms -= slice;
	}
}

/* After a retryable failure: RETRY after the wait, or STOP. */
static enum outcome wait_to_retry(struct llm_client *c, int *retry,
				  const struct exchange *ex,
				  const struct strbuf *last, struct strbuf *why)
{
	long delay;

	if (*retry >= c->cfg.retries) {
		strbuf_addf(why, "giving up after %d %s: %s", *retry,
			    *retry == 1 ? "retry" : "retries", last->buf);
		return STOP;
	}
	delay = ex->retry_after_ms >= 0 ? ex->retry_after_ms :
		llm_backoff_ms(c->cfg.backoff_ms, *retry + 1, next_random(c));
	if (c->deadline_ns &&
	    now_ns() + (long long)delay * 1000000 >= c->deadline_ns) {
		strbuf_addf(why, "giving up after %d %s at the agent's time "
			    "limit: %s", *retry, *retry == 1 ? "retry" :
			    "retries", last->buf);
		return STOP;
	}
	(*retry)++;
	if (!c->quiet)
		fprintf(stderr, "llm: %s; retry %d of %d in %.1f s\n",
			last->buf, *retry, c->cfg.retries, delay / 1000.0);
	sleep_ms(delay);
	if (run_interrupted) {
		strbuf_addstr(why, "interrupted");
		return STOP;
	}
	return RETRY;
}

static long request_timeout_ms(const struct llm_client *c)
{
	long ms = (long)c->cfg.timeout_s * 1000;
	long long left;

	if (c->deadline_ns) {
		left = (c->deadline_ns - now_ns()) / 1000000;
		if (left < ms)
			ms = left > 1000 ? (long)left : 1000;
	}
	return ms > 0 ? ms : 1000;
}

/* The first transcript number not taken: an experiment the loop did not
 * record is proposed again under the same number. */
static int first_free(const char *prefix)
{
	struct strbuf path = STRBUF_INIT;
	int n = 1;

	while (prefix) {
		strbuf_reset(&path);
		strbuf_addf(&path, "%s%d.json", prefix, n);
		if (access(path.buf, F_OK))
			break;
		n++;
	}
	strbuf_release(&path);
	return n;
}

int llm_complete(struct llm_client *c, const struct llm_prompt *p,
		 const char *transcript, struct llm_answer *ans,
		 struct strbuf *why)
{
	struct strbuf url = STRBUF_INIT, last = STRBUF_INIT;
	enum outcome o = STOP;
	json_t *probe;
	int retry = 0;

	if (!c->curl) {
		curl_global_init(CURL_GLOBAL_DEFAULT);
		c->curl = curl_easy_init();
	}
	if (!c->curl) {
		strbuf_addstr(why, "unable to start libcurl");
		return -1;
	}
	/* only invalid UTF-8 makes this fail, every time */
	probe = llm_request_body(&c->cfg, p);
	if (!probe) {
		strbuf_addstr(why, "unable to encode the request as JSON");
		return -1;
	}
	json_decref(probe);
	endpoint(&url, &c->cfg);
	for (int n = first_free(transcript);; n++) {
		struct exchange ex = { .reason = STRBUF_INIT,
				       .headers = STRBUF_INIT,
				       .body = STRBUF_INIT,
				       .retry_after_ms = -1 };
		json_t *req = llm_request_body(&c->cfg, p);
		json_t *shown = json_array();
		struct curl_slist *hdr = headers(&c->cfg, shown);
		char *body = json_dumps(req, JSON_COMPACT);
		size_t mark = why->len;

		perform(c, url.buf, body, hdr, request_timeout_ms(c), &ex);
		ans->requests++;
		ans->seconds += ex.seconds;
		o = decide(c, url.buf, &ex, ans, &last, why);
		save_transcript(c, transcript, n, url.buf, req, shown, &ex,
				o == RETRY ? last.buf : why->buf + mark);
		if (o == RETRY)
			o = wait_to_retry(c, &retry, &ex, &last, why);
		curl_slist_free_all(hdr);
		json_decref(req);
		json_decref(shown);
		free(body);
		strbuf_release(&ex.reason);
		strbuf_release(&ex.headers);
		strbuf_release(&ex.body);
		if (o != RETRY && o != RESEND)
			break;
	}
	llm_redact(why, c->cfg.key);
	strbuf_release(&url);
	strbuf_release(&last);
	return o == DONE ? 0 : o == FAILED ? 1 : -1;
}
