/*
 * unit-llm.c: the llm agent, in TAP.  First its pure parts (reading a
 * reply, SEARCH/REPLACE, redaction, backoff, Retry-After, the two wire
 * formats), then its HTTP side and the whole agent against
 * tests/mock-llm.py on loopback (skipped without python3).
 */
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "agent/agent.h"
#include "agent/llm-http.h"
#include "agent/llm-reply.h"
#include "lib/paths.h"
#include "lib/repo.h"
#include "lib/run.h"
#include "tests/tap.h"

#define KEY "sk-TESTKEY-unit-7f3a9c"


static void skip(const char *what, const char *why)
{
	tests++;
	printf("ok %d # skip %s (%s)\n", tests, what, why);
}

static void diag(const char *label, const char *s)
{
	printf("#   %s: '%s'\n", label, s ? s : "(null)");
}

static int contains(const char *s, const char *sub)
{
	return s && strstr(s, sub) != NULL;
}

/* ---- reading replies ---- */

static const char kernel[] =
	"#include \"autokernel.h\"\n"
	"#define BLOCK 256\n"
	"int ak_kernel(const struct ak_args *a)\n"
	"{\n"
	"\treturn 0;\n"
	"}\n";
static const char krel[] = "softmax/kernel.c";

/* Parses reply against kernel[]; rc, and what came out. */
static int parse(const char *reply, int truncated, struct llm_edit *e,
		 struct strbuf *why)
{
	strbuf_reset(why);
	return llm_reply_parse(e, reply, strlen(reply), krel, kernel,
			       truncated, why);
}

static void expect_kernel(const char *name, const char *reply,
			  const char *want_kernel, const char *want_hyp)
{
	struct llm_edit e = LLM_EDIT_INIT;
	struct strbuf why = STRBUF_INIT;
	int rc = parse(reply, 0, &e, &why);

	if (!ok(rc == 0 && !strcmp(e.kernel.buf, want_kernel) &&
		(!want_hyp || !strcmp(e.hypothesis.buf, want_hyp)), "%s",
		name)) {
		diag("why", why.buf);
		diag("kernel", e.kernel.buf);
		diag("hypothesis", e.hypothesis.buf);
	}
	llm_edit_release(&e);
	strbuf_release(&why);
}

static void expect_failure(const char *name, const char *reply,
			   int truncated, const char *want_why)
{
	struct llm_edit e = LLM_EDIT_INIT;
	struct strbuf why = STRBUF_INIT;
	int rc = parse(reply, truncated, &e, &why);

	if (!ok(rc == 1 && contains(why.buf, want_why) && !e.kernel.len,
		"%s", name)) {
		diag("why", why.buf);
		diag("want", want_why);
	}
	llm_edit_release(&e);
	strbuf_release(&why);
}

static const char newk[] =
	"#include \"autokernel.h\"\n"
	"#define BLOCK 512\n"
	"int ak_kernel(const struct ak_args *a)\n"
	"{\n"
	"\treturn 0;\n"
	"}\n";

static void test_whole_file(void)
{
	struct strbuf r = STRBUF_INIT;

	strbuf_addf(&r, "Raise BLOCK to 512 for more bytes in flight\n\n"
		    "```c\n%s```\n", newk);
	expect_kernel("the last fenced block is the new file", r.buf, newk,
		      "Raise BLOCK to 512 for more bytes in flight");

	strbuf_reset(&r);
	strbuf_addf(&r, "Bigger blocks\n```c\nint old;\n```\nthen\n```cuda\n%s"
		    "```\n", newk);
	expect_kernel("of two blocks the last one wins", r.buf, newk,
		      "Bigger blocks");

	strbuf_reset(&r);
	strbuf_addf(&r, "**Hypothesis:** Bigger blocks.\n\nsoftmax/kernel.c:\n"
		    "```c\n%s```\nBuild it with:\n```bash\nmake\n```\n", newk);
	expect_kernel("a trailing shell block and a path line are skipped",
		      r.buf, newk, "Bigger blocks.");

	strbuf_reset(&r);
	strbuf_addf(&r, "# Hypothesis - bigger blocks\r\n\r\n```c kernel.c\r\n"
		    "%s```\r\n", newk);
	expect_kernel("CRLF, a heading and the path in the info string",
		      r.buf, newk, "bigger blocks");

	strbuf_reset(&r);
	strbuf_addf(&r, "<think>maybe ```c\nint x;\n``` no</think>\nThe real "
		    "one\n```c\n%s```", newk);
	expect_kernel("<think> is dropped", r.buf, newk, "The real one");

	strbuf_reset(&r);
	strbuf_addstr(&r, "1. Indented in a list\n\n   ```c\n");
	strbuf_add_indented(&r, newk, "   ");
	strbuf_addstr(&r, "   ```\n");
	expect_kernel("an indented fence loses its indentation", r.buf, newk,
		      "Indented in a list");

	strbuf_reset(&r);
	strbuf_addf(&r, "```c\n%s```\n", newk);
	expect_kernel("no hypothesis gets a placeholder", r.buf, newk,
		      "unexplained edit (the reply gave no hypothesis)");

	strbuf_reset(&r);
	strbuf_addf(&r, "Missing fence at the end\n```c\n%s", newk);
	expect_kernel("an unclosed last block is accepted", r.buf, newk, NULL);

	strbuf_reset(&r);
	for (int i = 0; i < 30; i++)
		strbuf_addstr(&r, "word word ");
	strbuf_addf(&r, "\n```c\n%s```\n", newk);
	{
		struct llm_edit e = LLM_EDIT_INIT;
		struct strbuf why = STRBUF_INIT;

		parse(r.buf, 0, &e, &why);
		ok(e.hypothesis.len <= LLM_HYPOTHESIS_MAX &&
		   e.hypothesis.len > 100 && !ends_with(e.hypothesis.buf, " "),
		   "a long hypothesis is cut at a word");
		llm_edit_release(&e);
		strbuf_release(&why);
	}
	strbuf_release(&r);
}

static void test_failures(void)
{
	struct strbuf r = STRBUF_INIT;

	expect_failure("an empty reply", " \n\t\n", 0, "empty reply");
	expect_failure("no code block", "I would unroll the loop.", 0,
		       "no code block in the reply");
	expect_failure("cut off before the block", "Let me think", 1,
		       "cut off at the token limit before");

	strbuf_addf(&r, "Unroll\n```c other/file.c\n%s```\n", newk);
	expect_failure("a block whose info names another file", r.buf, 0,
		       "the reply edits 'other/file.c', not softmax/kernel.c");

	strbuf_reset(&r);
	strbuf_addf(&r, "Unroll\n\n`include/autokernel.h`:\n```c\n%s```\n",
		    newk);
	expect_failure("a block after a line naming another file", r.buf, 0,
		       "the reply edits 'include/autokernel.h'");

	strbuf_reset(&r);
	strbuf_addf(&r, "Unroll\n```c\n%s```\nAnd:\n```diff\n--- a/bin/x.c\n"
		    "+++ b/bin/x.c\n@@ -1 +1 @@\n-a\n+b\n```\n", newk);
	expect_failure("a diff for another file", r.buf, 0,
		       "the reply edits 'bin/x.c'");

	expect_failure("a diff of the kernel",
		       "Unroll\n```diff\n--- a/softmax/kernel.c\n+++ "
		       "b/softmax/kernel.c\n@@ -2 +2 @@\n-#define BLOCK 256\n"
		       "+#define BLOCK 512\n```\n", 0, "the reply is a diff");

	strbuf_reset(&r);
	strbuf_addf(&r, "Same\n```c\n%s```\n", kernel);
	expect_failure("no change", r.buf, 0,
		       "the reply does not change softmax/kernel.c");

	expect_failure("a fragment", "Faster\n```c\n#define BLOCK 512\n```\n",
		       0, "does not define ak_kernel()");
	expect_failure("an empty block", "Faster\n```c\n\n```\n", 0,
		       "code block is empty");

	strbuf_reset(&r);
	strbuf_addf(&r, "Cut\n```c\n%s", newk);
	expect_failure("an unclosed block when cut off", r.buf, 1,
		       "cut off at the token limit inside its code block");

	strbuf_reset(&r);
	strbuf_addstr(&r, "Huge\n```c\n");
	while (r.len < 600 * 1024)
		strbuf_addstr(&r, "/* padding padding padding padding */\n");
	strbuf_addstr(&r, "```\n");
	expect_failure("a reply over 512 KB", r.buf, 0,
		       "reply of 600 KB is over the 512 KB limit");

	strbuf_reset(&r);
	strbuf_addf(&r, "Huge\n```c\n%s", newk);
	while (r.len < 300 * 1024)
		strbuf_addstr(&r, "/* padding padding padding padding */\n");
	strbuf_addstr(&r, "```\n");
	expect_failure("a kernel over 256 KB", r.buf, 0,
		       "KB is over the 256 KB limit");
	strbuf_release(&r);
}

static void test_search_replace(void)
{
	static const char one[] =
		"Raise BLOCK\n\nsoftmax/kernel.c\n```c\n<<<<<<< SEARCH\n"
		"#define BLOCK 256\n=======\n#define BLOCK 512\n"
		">>>>>>> REPLACE\n```\n";
	static const char ws[] =
		"Raise BLOCK\n<<<<<<< SEARCH\n#define BLOCK 256   \n{\n"
		"=======\n#define BLOCK 512\n{\n>>>>>>> REPLACE\n";
	static const char two[] =
		"Two edits\n```c\n<<<<<<< SEARCH\n#define BLOCK 256\n=======\n"
		"#define BLOCK 512\n>>>>>>> REPLACE\n```\n```c\n"
		"<<<<<<< SEARCH\n\treturn 0;\n=======\n\treturn 1;\n"
		">>>>>>> REPLACE\n```\n";
	struct llm_edit e = LLM_EDIT_INIT;
	struct strbuf why = STRBUF_INIT;

	expect_kernel("a SEARCH/REPLACE block", one, newk, "Raise BLOCK");
	expect_failure("SEARCH/REPLACE with trailing blanks and a line not in "
		       "the file", ws, 0, "does not match softmax/kernel.c");
	ok(parse(two, 0, &e, &why) == 0 && e.blocks == 2 &&
	   contains(e.kernel.buf, "BLOCK 512") &&
	   contains(e.kernel.buf, "return 1;"), "two SEARCH/REPLACE blocks");
	expect_failure("a SEARCH that matches nothing",
		       "X\n<<<<<<< SEARCH\nint nothing;\n=======\nint x;\n"
		       ">>>>>>> REPLACE\n", 0,
		       "SEARCH block 1 does not match softmax/kernel.c (its "
		       "first line: 'int nothing;')");
	expect_failure("a SEARCH that matches twice",
		       "X\n<<<<<<< SEARCH\n#define BLOCK 256\n=======\n"
		       "#define BLOCK 256\n#define BLOCK 256\n>>>>>>> REPLACE\n"
		       "<<<<<<< SEARCH\n#define BLOCK 256\n=======\n\n"
		       ">>>>>>> REPLACE\n", 0,
		       "SEARCH block 2 matches 2 places in softmax/kernel.c");
	expect_failure("a SEARCH/REPLACE for another file",
		       "X\nbin/other.c\n```c\n<<<<<<< SEARCH\n{\n=======\n"
		       "{ \n>>>>>>> REPLACE\n```\n", 0,
		       "the reply edits 'bin/other.c'");
	expect_failure("an unterminated SEARCH/REPLACE",
		       "X\n<<<<<<< SEARCH\n{\n=======\n{ \n", 1,
		       "not terminated (the reply was cut off");
	expect_kernel("trailing blanks in SEARCH are forgiven",
		      "Raise BLOCK\n<<<<<<< SEARCH\n#define BLOCK 256   \n"
		      "=======\n#define BLOCK 512\n>>>>>>> REPLACE\n", newk,
		      "Raise BLOCK");
	llm_edit_release(&e);
	strbuf_release(&why);
}

static void test_paths_and_redaction(void)
{
	struct strbuf sb = STRBUF_INIT;
	char size[32];

	ok(llm_path_is_kernel("softmax/kernel.c", krel) &&
	   llm_path_is_kernel("kernel.c", krel) &&
	   llm_path_is_kernel("./softmax/kernel.c", krel) &&
	   llm_path_is_kernel("b/softmax/kernel.c", krel) &&
	   llm_path_is_kernel("/home/me/repo/softmax/kernel.c", krel),
	   "the ways a model names the kernel");
	ok(!llm_path_is_kernel("other/kernel.c", krel) &&
	   !llm_path_is_kernel("ernel.c", krel) &&
	   !llm_path_is_kernel("softmax/kernel.cu", krel),
	   "other files are not the kernel");

	strbuf_addstr(&sb, "Bearer " KEY " and \"" KEY "\" again " KEY);
	llm_redact(&sb, KEY);
	ok(!contains(sb.buf, KEY) && !strcmp(sb.buf, "Bearer <redacted> and "
	   "\"<redacted>\" again <redacted>"), "the key is redacted");
	strbuf_reset(&sb);
	strbuf_addstr(&sb, "{\"k\": \"a\\\"b\"}");
	llm_redact(&sb, "a\"b");
	ok(!strcmp(sb.buf, "{\"k\": \"<redacted>\"}"),
	   "and its JSON-escaped form");
	strbuf_reset(&sb);
	strbuf_addstr(&sb, "nothing");
	llm_redact(&sb, NULL);
	llm_redact(&sb, "");
	ok(!strcmp(sb.buf, "nothing"), "no key, nothing redacted");
	strbuf_reset(&sb);
	strbuf_addstr(&sb, "caf\xc3\xa9 \xe9t\xe9 \xf0\x9f\x9a\x80 \xed\xa0\x80");
	llm_utf8_fix(&sb);
	ok(!strcmp(sb.buf, "caf\xc3\xa9 ?t? \xf0\x9f\x9a\x80 ???"),
	   "invalid UTF-8 becomes '?', valid stays");
	llm_human_size(size, sizeof(size), 2200000);
	ok(!strcmp(size, "2.1 MB"), "2200000 bytes are 2.1 MB (%s)", size);
	strbuf_release(&sb);
}

/* ---- retries ---- */

static void test_backoff(void)
{
	int in_range = 1;

	ok(llm_backoff_ms(1000, 1, 0) == 500,
	   "retry 1: at least half the base");
	for (uint64_t r = 0; r < 2000; r += 7) {
		long d1 = llm_backoff_ms(1000, 1, r * 0x9e3779b97f4a7c15ULL);
		long d3 = llm_backoff_ms(1000, 3, r * 0x9e3779b97f4a7c15ULL);
		long d9 = llm_backoff_ms(1000, 30, r);

		if (d1 < 500 || d1 > 1000 || d3 < 2000 || d3 > 4000 ||
		    d9 < LLM_BACKOFF_CAP_MS / 2 || d9 > LLM_BACKOFF_CAP_MS)
			in_range = 0;
	}
	ok(in_range, "backoff doubles per retry with jitter, up to the cap");
	ok(llm_backoff_ms(0, 3, 12345) == 0, "a zero base never waits");
}

static void http_date(char *buf, size_t n, time_t t)
{
	strftime(buf, n, "%a, %d %b %Y %H:%M:%S GMT", gmtime(&t));
}

static void test_retry_after(void)
{
	char date[64];
	time_t now = time(NULL), then = now + 30;
	long ms;

	ok(llm_retry_after_ms("5", now) == 5000, "Retry-After: 5");
	ok(llm_retry_after_ms(" 2 ", now) == 2000, "Retry-After with blanks");
	ok(llm_retry_after_ms("0", now) == 0, "Retry-After: 0");
	ok(llm_retry_after_ms("86400", now) == LLM_RETRY_AFTER_CAP_MS,
	   "a day is capped at %ld ms", LLM_RETRY_AFTER_CAP_MS);
	ok(llm_retry_after_ms("soon", now) == -1 &&
	   llm_retry_after_ms(NULL, now) == -1 &&
	   llm_retry_after_ms("", now) == -1, "nonsense is no Retry-After");
	http_date(date, sizeof(date), then);
	ms = llm_retry_after_ms(date, now);
	ok(ms == 30000, "an HTTP-date 30 s ahead (%ld ms)", ms);
	then = now - 100;
	http_date(date, sizeof(date), then);
	ok(llm_retry_after_ms(date, now) == 0, "a date in the past: now");
}

/* ---- wire formats ---- */

static void test_wire(void)
{
	struct llm_config cfg = { .provider = LLM_OPENAI, .model = "m1",
				  .temperature = 0.7, .max_tokens = 123 };
	struct llm_answer a = LLM_ANSWER_INIT;
	struct strbuf why = STRBUF_INIT, msg = STRBUF_INIT;
	struct llm_prompt pr = { "SYS", "USER", 0 };
	json_t *b = llm_request_body(&cfg, &pr), *m;
	const char *body;

	m = json_object_get(b, "messages");
	ok(!strcmp(json_string_value(json_object_get(b, "model")), "m1") &&
	   json_array_size(m) == 2 &&
	   !strcmp(json_string_value(json_object_get(json_array_get(m, 0),
						     "role")), "system") &&
	   !strcmp(json_string_value(json_object_get(json_array_get(m, 1),
						     "content")), "USER") &&
	   json_integer_value(json_object_get(b, "max_tokens")) == 123 &&
	   json_real_value(json_object_get(b, "temperature")) == 0.7,
	   "an OpenAI chat-completions body");
	json_decref(b);
	cfg.max_completion_tokens = 1;
	cfg.temperature = -1;
	b = llm_request_body(&cfg, &pr);
	ok(json_object_get(b, "max_completion_tokens") &&
	   !json_object_get(b, "max_tokens") &&
	   !json_object_get(b, "temperature"),
	   "max_completion_tokens, and no temperature when negative");
	json_decref(b);
	cfg.provider = LLM_ANTHROPIC;
	cfg.temperature = 0.5;
	b = llm_request_body(&cfg, &pr);
	m = json_object_get(b, "messages");
	ok(!strcmp(json_string_value(json_object_get(b, "system")), "SYS") &&
	   json_array_size(m) == 1 &&
	   !strcmp(json_string_value(json_object_get(json_array_get(m, 0),
						     "role")), "user") &&
	   json_integer_value(json_object_get(b, "max_tokens")) == 123,
	   "an Anthropic messages body");
	json_decref(b);
	pr.user = "FIXED PART|CHANGING PART";
	pr.stable = 11;
	b = llm_request_body(&cfg, &pr);
	m = json_object_get(json_array_get(json_object_get(b, "messages"), 0),
			    "content");
	ok(json_array_size(m) == 2 &&
	   !strcmp(json_string_value(json_object_get(json_array_get(m, 0),
						     "text")), "FIXED PART|") &&
	   json_object_get(json_array_get(m, 0), "cache_control") &&
	   !strcmp(json_string_value(json_object_get(json_array_get(m, 1),
						     "text")), "CHANGING PART"),
	   "the stable part is marked for Anthropic's prompt cache");
	json_decref(b);

	body = "{\"model\":\"claude-x\",\"content\":[{\"type\":\"thinking\","
	       "\"thinking\":\"hm\"},{\"type\":\"text\",\"text\":\"Hi\"},"
	       "{\"type\":\"text\",\"text\":\" there\"}],\"stop_reason\":"
	       "\"max_tokens\",\"usage\":{\"input_tokens\":10,"
	       "\"cache_read_input_tokens\":5,\"output_tokens\":7}}";
	ok(llm_response_parse(&cfg, body, strlen(body), &a, &why) == 0 &&
	   !strcmp(a.text.buf, "Hi there") && a.in_tokens == 15 &&
	   a.out_tokens == 7 && a.truncated &&
	   !strcmp(a.model.buf, "claude-x"), "an Anthropic answer");
	llm_answer_release(&a);
	a = (struct llm_answer)LLM_ANSWER_INIT;
	cfg.provider = LLM_OPENAI;
	body = "{\"model\":\"gpt-x\",\"choices\":[{\"message\":{\"role\":"
	       "\"assistant\",\"content\":\"Yo\"},\"finish_reason\":\"stop\"}],"
	       "\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":4}}";
	ok(llm_response_parse(&cfg, body, strlen(body), &a, &why) == 0 &&
	   !strcmp(a.text.buf, "Yo") && a.in_tokens == 3 &&
	   a.out_tokens == 4 && !a.truncated, "an OpenAI answer");
	llm_answer_release(&a);
	a = (struct llm_answer)LLM_ANSWER_INIT;
	body = "{\"choices\": [{\"message\": {\"content\": \"x\"}";
	ok(llm_response_parse(&cfg, body, strlen(body), &a, &why) == 1 &&
	   contains(why.buf, "malformed JSON"), "malformed JSON");
	strbuf_reset(&why);
	body = "{\"object\":\"chat.completion\"}";
	ok(llm_response_parse(&cfg, body, strlen(body), &a, &why) == 1 &&
	   contains(why.buf, "no choices"), "no choices");
	llm_answer_release(&a);

	body = "{\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\","
	       "\"message\":\"Overloaded\"}}";
	llm_error_message(&msg, body, strlen(body));
	ok(!strcmp(msg.buf, "Overloaded"), "an error's message");
	body = "{\"detail\":\"Not found\"}";
	llm_error_message(&msg, body, strlen(body));
	ok(!strcmp(msg.buf, "Not found"), "a FastAPI error's detail");
	body = "<html><body>502</body></html>";
	llm_error_message(&msg, body, strlen(body));
	ok(!msg.len, "an HTML error page says nothing");
	ok(!strcmp(llm_status_reason(429), "Too Many Requests") &&
	   !strcmp(llm_status_reason(529), "Overloaded"), "status reasons");
	strbuf_release(&why);
	strbuf_release(&msg);
}

/* ---- against the mock server ---- */

struct mock {
	struct child c;
	char dir[PATH_MAX], script[PATH_MAX + 32], log[PATH_MAX + 32];
	char url[128];
	int running;
};

static struct mock mock = { .c = CHILD_INIT };

static void write_text(const char *path, const char *text)
{
	struct strbuf tmp = STRBUF_INIT;
	FILE *f;

	strbuf_addf(&tmp, "%s.new", path);
	f = fopen(tmp.buf, "w");
	if (f) {
		fputs(text, f);
		fclose(f);
		rename(tmp.buf, path);
	}
	strbuf_release(&tmp);
}

/* A new script for the mock, and an empty request log. */
static void script(const char *json)
{
	write_text(mock.script, json);
	write_text(mock.log, "");
}

static char *find_mock(void)
{
	char exe[PATH_MAX], path[PATH_MAX + 64], *slash, *real;
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	const char *env = getenv("AK_SRC_DIR");

	if (env) {
		snprintf(path, sizeof(path), "%s/tests/mock-llm.py", env);
		if ((real = realpath(path, NULL)))
			return real;
	}
	if (n > 0) {
		exe[n] = '\0';
		if ((slash = strrchr(exe, '/')))
			*slash = '\0';
		/* build/tests/unit-llm -> tests/mock-llm.py */
		snprintf(path, sizeof(path), "%s/../../tests/mock-llm.py", exe);
		if ((real = realpath(path, NULL)))
			return real;
	}
	return realpath("tests/mock-llm.py", NULL);
}

static int mock_start(const char *tmp)
{
	char *py = find_mock(), port[PATH_MAX + 32];
	struct strbuf sb = STRBUF_INIT;

	if (!py)
		return -1;
	snprintf(mock.dir, sizeof(mock.dir), "%s", tmp);
	snprintf(mock.script, sizeof(mock.script), "%s/script.json", tmp);
	snprintf(mock.log, sizeof(mock.log), "%s/requests.log", tmp);
	snprintf(port, sizeof(port), "%s/port", tmp);
	script("[]");
	strvec_pushl(&mock.c.args, "python3", py, "--script", mock.script,
		     "--port-file", port, "--log", mock.log, "--idle", "120",
		     NULL);
	mock.c.no_stdin = 1;
	mock.c.quiet = 1;
	free(py);
	if (start_child(&mock.c) < 0)
		return -1;
	for (int i = 0; i < 600; i++) {
		if (strbuf_read_file(&sb, port) > 0)
			break;
		usleep(50000);
	}
	if (!sb.len) {
		kill_child(&mock.c);
		return -1;
	}
	snprintf(mock.url, sizeof(mock.url), "http://127.0.0.1:%d/v1",
		 atoi(sb.buf));
	strbuf_release(&sb);
	mock.running = 1;
	return 0;
}

/* The n-th request the mock saw (1-based), or NULL. */
static json_t *request(int n)
{
	struct strbuf sb = STRBUF_INIT;
	const char *p;
	json_t *j = NULL;

	if (strbuf_read_file(&sb, mock.log) < 0)
		return NULL;
	p = sb.buf;
	for (int i = 1; *p; i++) {
		const char *eol = strchrnul(p, '\n');

		if (i == n) {
			j = json_loadb(p, eol - p, 0, NULL);
			break;
		}
		p = *eol ? eol + 1 : eol;
	}
	strbuf_release(&sb);
	return j;
}

static void client_init(struct llm_client *c, enum llm_provider p)
{
	*c = (struct llm_client)LLM_CLIENT_INIT;
	c->cfg.provider = p;
	c->cfg.url = xstrdup(mock.url);
	c->cfg.model = xstrdup("mock-model");
	c->cfg.key = xstrdup(KEY);
	c->cfg.temperature = 0.7;
	c->cfg.max_tokens = 1000;
	c->cfg.timeout_s = 5;
	c->cfg.retries = 2;
	c->cfg.backoff_ms = 1;
	c->quiet = 1;
}

struct call {
	int rc;
	struct llm_answer a;
	struct strbuf why;
	double seconds;
};

static void call(struct call *x, enum llm_provider p, const char *prefix,
		 void (*tweak)(struct llm_client *))
{
	struct llm_client c;
	long long t0 = now_ns();

	client_init(&c, p);
	if (tweak)
		tweak(&c);
	x->a = (struct llm_answer)LLM_ANSWER_INIT;
	strbuf_init(&x->why, 0);
	x->rc = llm_complete(&c, &(struct llm_prompt){ "SYS", "USER", 0 },
			     prefix, &x->a, &x->why);
	x->seconds = (now_ns() - t0) / 1e9;
	llm_client_release(&c);
}

static void call_release(struct call *x)
{
	llm_answer_release(&x->a);
	strbuf_release(&x->why);
}

static void short_timeout(struct llm_client *c)
{
	c->cfg.timeout_s = 1;
}

static void closed_port(struct llm_client *c)
{
	free(c->cfg.url);
	c->cfg.url = xstrdup("http://127.0.0.1:1/v1");
	c->cfg.retries = 1;
}

/* A request header's value, "" when absent. */
static const char *header(json_t *req, const char *name)
{
	const char *k;
	json_t *v;

	json_object_foreach(json_object_get(req, "headers"), k, v)
		if (!strcasecmp(k, name) && json_string_value(v))
			return json_string_value(v);
	return "";
}

static void test_http(const char *tmp)
{
	struct strbuf prefix = STRBUF_INIT, path = STRBUF_INIT;
	struct strbuf text = STRBUF_INIT;
	struct call x;
	json_t *req;

	strbuf_addf(&prefix, "%s/t-", tmp);
	script("[{\"reply\": \"Hello\\n```c\\nint x;\\n```\"}]");
	call(&x, LLM_OPENAI, prefix.buf, NULL);
	req = request(1);
	ok(x.rc == 0 && !strcmp(x.a.text.buf, "Hello\n```c\nint x;\n```") &&
	   x.a.in_tokens == 1200 && x.a.out_tokens == 340 &&
	   x.a.requests == 1 && !strcmp(x.a.model.buf, "mock-model"),
	   "openai: a reply, its tokens and model");
	ok(req && !strcmp(json_string_value(json_object_get(req, "path")),
			  "/v1/chat/completions") &&
	   !strcmp(header(req, "Authorization"), "Bearer " KEY) &&
	   json_integer_value(json_object_get(json_object_get(req, "body"),
					      "max_tokens")) == 1000,
	   "openai: the request's path, key and body");
	json_decref(req);
	strbuf_addf(&path, "%s1.json", prefix.buf);
	ok(strbuf_read_file(&text, path.buf) > 0 &&
	   contains(text.buf, "Bearer <redacted>") &&
	   !contains(text.buf, KEY) &&
	   contains(text.buf, "\"status\": 200"),
	   "a transcript without the key");
	call_release(&x);

	script("[{\"status\": 429, \"headers\": {\"Retry-After\": \"0\"}, "
	       "\"json\": {\"error\": {\"message\": \"slow down\"}}}, "
	       "{\"reply\": \"ok\"}]");
	call(&x, LLM_OPENAI, prefix.buf, NULL);
	strbuf_reset(&path);
	strbuf_addf(&path, "%s3.json", prefix.buf);
	ok(x.rc == 0 && x.a.requests == 2 && !strcmp(x.a.text.buf, "ok") &&
	   !access(path.buf, F_OK), "429 then success, each transcribed");
	call_release(&x);

	script("[{\"status\": 500, \"repeat\": 5}]");
	call(&x, LLM_OPENAI, NULL, NULL);
	if (!ok(x.rc == -1 && x.a.requests == 3 && !strcmp(x.why.buf,
		"giving up after 2 retries: HTTP 500 Internal Server Error"),
		"repeated 500s stop after the retries"))
		diag("why", x.why.buf);
	call_release(&x);

	script("[{\"status\": 503, \"headers\": {\"Retry-After\": \"1\"}}, "
	       "{\"reply\": \"ok\"}]");
	call(&x, LLM_OPENAI, NULL, NULL);
	ok(x.rc == 0 && x.seconds >= 0.9, "Retry-After is honoured (%.2f s)",
	   x.seconds);
	call_release(&x);

	script("[{\"delay\": 3, \"reply\": \"late\"}, {\"reply\": \"ok\"}]");
	call(&x, LLM_OPENAI, NULL, short_timeout);
	ok(x.rc == 0 && x.a.requests == 2 && !strcmp(x.a.text.buf, "ok") &&
	   x.seconds < 2.9, "a timeout is retried (%.2f s)", x.seconds);
	call_release(&x);

	script("[{\"delay\": 3, \"reply\": \"late\", \"repeat\": 3}]");
	call(&x, LLM_OPENAI, NULL, short_timeout);
	if (!ok(x.rc == -1 && contains(x.why.buf, "giving up after 2 retries: "
		"no answer from") && contains(x.why.buf, "within 1 s"),
		"timeouts to the end stop the run"))
		diag("why", x.why.buf);
	call_release(&x);

	script("[{\"body\": \"{not json\"}]");
	call(&x, LLM_OPENAI, NULL, NULL);
	ok(x.rc == 1 && x.a.requests == 1 &&
	   contains(x.why.buf, "malformed JSON in the server's answer"),
	   "malformed JSON fails the experiment");
	call_release(&x);

	script("[{\"status\": 400, \"json\": {\"error\": {\"message\": "
	       "\"prompt is too long\"}}}]");
	call(&x, LLM_OPENAI, NULL, NULL);
	ok(x.rc == 1 && x.a.requests == 1 &&
	   !strcmp(x.why.buf, "HTTP 400: prompt is too long"),
	   "400 fails the experiment with the server's message");
	call_release(&x);

	script("[{\"status\": 401, \"json\": {\"error\": {\"message\": "
	       "\"Incorrect API key provided: " KEY "\"}}}]");
	call(&x, LLM_OPENAI, prefix.buf, NULL);
	if (!ok(x.rc == -1 && x.a.requests == 1 &&
		starts_with(x.why.buf, "HTTP 401 Unauthorized: Incorrect API "
			    "key provided: <redacted>") &&
		!contains(x.why.buf, KEY), "401 stops at once, key redacted"))
		diag("why", x.why.buf);
	strbuf_reset(&path);
	strbuf_addf(&path, "%s4.json", prefix.buf);
	strbuf_reset(&text);
	ok(strbuf_read_file(&text, path.buf) > 0 && !contains(text.buf, KEY) &&
	   contains(text.buf, "Incorrect API key provided: <redacted>"),
	   "an answer echoing the key is redacted in its transcript");
	call_release(&x);

	script("[{\"status\": 404, \"json\": {\"error\": {\"message\": "
	       "\"no such model\"}}}]");
	call(&x, LLM_OPENAI, NULL, NULL);
	ok(x.rc == -1 && x.a.requests == 1 && contains(x.why.buf,
	   "HTTP 404 Not Found: no such model (check autokernel.llm.url"),
	   "404 stops at once");
	call_release(&x);

	script("[{\"status\": 400, \"json\": {\"error\": {\"message\": "
	       "\"Unsupported parameter: 'max_tokens' is not supported with "
	       "this model. Use 'max_completion_tokens' instead.\"}}}, "
	       "{\"status\": 400, \"json\": {\"error\": {\"message\": "
	       "\"Unsupported value: 'temperature' does not support 0.7\"}}}, "
	       "{\"reply\": \"ok\"}]");
	call(&x, LLM_OPENAI, NULL, NULL);
	req = request(3);
	ok(x.rc == 0 && x.a.requests == 3 && req &&
	   json_object_get(json_object_get(req, "body"),
			   "max_completion_tokens") &&
	   !json_object_get(json_object_get(req, "body"), "temperature"),
	   "a model that wants max_completion_tokens and no temperature");
	json_decref(req);
	call_release(&x);

	script("[{\"reply\": \"Hi\", \"finish\": \"length\"}]");
	call(&x, LLM_ANTHROPIC, NULL, NULL);
	req = request(1);
	ok(x.rc == 0 && !strcmp(x.a.text.buf, "Hi") && x.a.truncated &&
	   x.a.in_tokens == 1200 && req &&
	   !strcmp(json_string_value(json_object_get(req, "path")),
		   "/v1/messages") &&
	   !strcmp(header(req, "x-api-key"), KEY) &&
	   !strcmp(header(req, "anthropic-version"), "2023-06-01") &&
	   !*header(req, "Authorization") &&
	   !strcmp(json_string_value(json_object_get(json_object_get(req,
		   "body"), "system")), "SYS"),
	   "anthropic: headers, body and a reply cut at max_tokens");
	json_decref(req);
	call_release(&x);

	call(&x, LLM_OPENAI, NULL, closed_port);
	if (!ok(x.rc == -1 && x.a.requests == 2 &&
		starts_with(x.why.buf, "giving up after 1 retry: unable to "
			    "reach 'http://127.0.0.1:1/v1/chat/completions'"),
		"a refused connection is retried, then stops"))
		diag("why", x.why.buf);
	call_release(&x);

	strbuf_release(&prefix);
	strbuf_release(&path);
	strbuf_release(&text);
}

/* ---- the whole agent ---- */

static int quiet_fd = -1;

static void stderr_off(void)
{
	int null = open("/dev/null", O_WRONLY);

	fflush(stderr);
	quiet_fd = dup(2);
	dup2(null, 2);
	close(null);
}

static void stderr_on(void)
{
	fflush(stderr);
	dup2(quiet_fd, 2);
	close(quiet_fd);
}

static int git(const char *dir, ...)
{
	struct child c = CHILD_INIT;
	va_list ap;
	const char *a;
	int rc;

	strvec_push(&c.args, "git");
	va_start(ap, dir);
	while ((a = va_arg(ap, const char *)))
		strvec_push(&c.args, a);
	va_end(ap);
	c.dir = dir;
	c.capture = 1;
	c.no_stdin = 1;
	c.timeout_ms = 30000;
	rc = run_child(&c);
	child_release(&c);
	return rc;
}

/* Whether any file under dir holds s. */
static int tree_holds(const char *dir, const char *s)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int found = 0;

	while (d && !found && (e = readdir(d))) {
		struct strbuf p = STRBUF_INIT, text = STRBUF_INIT;
		struct stat st;

		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) {
			strbuf_release(&p);
			continue;
		}
		strbuf_addf(&p, "%s/%s", dir, e->d_name);
		if (!lstat(p.buf, &st) && S_ISDIR(st.st_mode))
			found = tree_holds(p.buf, s);
		else if (strbuf_read_file(&text, p.buf) >= 0)
			found = memmem(text.buf, text.len, s,
				       strlen(s)) != NULL;
		strbuf_release(&p);
		strbuf_release(&text);
	}
	if (d)
		closedir(d);
	return found;
}

struct agent_fixture {
	char repo[PATH_MAX], kpath[PATH_MAX + 32], prompt[PATH_MAX + 64];
	struct problem p;
	struct history h;
	struct agent_context ctx;
	struct agent *a;
};

static int propose(struct agent_fixture *f, struct proposal *pr, int exp)
{
	int rc;

	*pr = (struct proposal)PROPOSAL_INIT;
	write_text(f->kpath, kernel);
	f->ctx.experiment = exp;
	stderr_off();
	rc = f->a->propose(f->a, &f->ctx, pr);
	stderr_on();
	return rc;
}

static void test_agent(const char *tmp)
{
	struct agent_fixture f = { .h = HISTORY_INIT };
	struct proposal pr;
	struct strbuf sb = STRBUF_INIT, gitdir = STRBUF_INIT;
	json_t *req;
	char *u;
	int rc;

	snprintf(f.repo, sizeof(f.repo), "%s/repo", tmp);
	snprintf(f.kpath, sizeof(f.kpath), "%s/softmax/kernel.c", f.repo);
	mkdir_p(f.repo);
	strbuf_addf(&sb, "%s/softmax", f.repo);
	mkdir_p(sb.buf);
	if (git(f.repo, "init", "-q", NULL) || chdir(f.repo)) {
		ok(0, "a scratch repository");
		return;
	}
	git(NULL, "config", "autokernel.llm.url", mock.url, NULL);
	git(NULL, "config", "autokernel.llm.retries", "2", NULL);
	setenv("AUTOKERNEL_API_KEY", KEY, 1);
	setenv("AUTOKERNEL_LLM_BACKOFF_MS", "1", 1);
	problem_default(&f.p, op_find("softmax"), "host");
	snprintf(f.prompt, sizeof(f.prompt), "%s/.git/autokernel/prompt.md",
		 f.repo);
	f.ctx.name = "softmax";
	f.ctx.workdir = f.repo;
	f.ctx.kernel_path = f.kpath;
	f.ctx.kernel_rel = krel;
	f.ctx.prompt_path = f.prompt;
	f.ctx.p = &f.p;
	f.ctx.h = &f.h;
	f.ctx.timeout_ms = 60000;

	f.a = agent_new("llm");
	stderr_off();
	rc = f.a->init(f.a, 0, NULL);
	stderr_on();
	ok(rc < 0, "no autokernel.llm.model: init fails");
	agent_free(f.a);

	git(NULL, "config", "autokernel.llm.model", "mock-model", NULL);
	f.a = agent_new("llm");
	ok(f.a->init(f.a, 0, NULL) == 0, "init with a model and a local URL");

	strbuf_reset(&sb);
	strbuf_addf(&sb, "%s/good.c", tmp);
	write_text(sb.buf, "Raise BLOCK to 512 to keep more loads in flight\n"
		   "```c\n#include \"autokernel.h\"\n#define BLOCK 512\nint "
		   "ak_kernel(const struct ak_args *a)\n{\n\treturn 0;\n}\n"
		   "```\n");
	strbuf_insert_front(&sb, "[{\"reply_file\": \"");
	strbuf_addstr(&sb, "\"}]");
	script(sb.buf);
	rc = propose(&f, &pr, 1);
	strbuf_reset(&sb);
	strbuf_read_file(&sb, f.kpath);
	u = json_dumps(pr.usage, JSON_COMPACT | JSON_SORT_KEYS);
	if (!ok(rc == 0 && !strcmp(sb.buf, newk) &&
		!strcmp(pr.hypothesis.buf, "Raise BLOCK to 512 to keep more "
			"loads in flight"), "a good reply rewrites the kernel"))
		diag("failure", pr.failure.buf);
	ok(u && contains(u, "\"input\":1200") &&
	   contains(u, "\"output\":340") &&
	   contains(u, "\"model\":\"mock-model\"") &&
	   contains(u, "\"provider\":\"openai\"") && !contains(u, KEY),
	   "usage: %s", u ? u : "none");
	free(u);
	proposal_release(&pr);
	strbuf_reset(&sb);
	strbuf_read_file(&sb, f.prompt);
	if (!ok(contains(sb.buf, "# Task") && contains(sb.buf, "## The kernel "
		"ABI") && contains(sb.buf, "## Playbook (host)") &&
		contains(sb.buf, "#define BLOCK 256") &&
		contains(sb.buf, "Reply format"), "the prompt is saved"))
		diag("prompt", sb.buf);
	strbuf_reset(&gitdir);
	strbuf_addf(&gitdir, "%s/.git/autokernel/transcripts/softmax/1-1.json",
		    f.repo);
	ok(!access(gitdir.buf, F_OK), "its transcript is in .git/autokernel");

	script("[{\"reply\": \"I would unroll the inner loop.\"}]");
	rc = propose(&f, &pr, 2);
	ok(rc == 1 && !strcmp(pr.failure.buf, "no code block in the reply") &&
	   pr.usage, "no code block: the experiment fails, usage kept");
	proposal_release(&pr);

	script("[{\"reply\": \"Unroll\\n```c other/file.c\\nint ak_kernel;"
	       "\\n```\"}]");
	rc = propose(&f, &pr, 3);
	ok(rc == 1 && !strcmp(pr.failure.buf, "the reply edits "
	   "'other/file.c', not softmax/kernel.c"), "an edit of another file");
	proposal_release(&pr);
	req = request(1);
	ok(contains(json_string_value(json_object_get(json_array_get(
	   json_object_get(json_object_get(req, "body"), "messages"), 1),
	   "content")), "## Your previous reply was discarded\n\nno code "
	   "block in the reply."), "the next prompt says why the last reply "
	   "was discarded");
	json_decref(req);

	script("[{\"reply\": \"Huge\\n```c\\n\", \"pad\": 2200000}]");
	rc = propose(&f, &pr, 4);
	if (!ok(rc == 1 && !strcmp(pr.failure.buf,
		"reply of 2.1 MB is over the 512 KB limit"), "a huge reply"))
		diag("failure", pr.failure.buf);
	proposal_release(&pr);

	script("[{\"status\": 500, \"repeat\": 3}]");
	rc = propose(&f, &pr, 5);
	ok(rc == -1 && !strcmp(pr.failure.buf, "giving up after 2 retries: "
	   "HTTP 500 Internal Server Error"), "500s stop the run");
	proposal_release(&pr);

	script("[{\"status\": 400, \"body\": \"bad " KEY "\", \"repeat\": 3}]");
	rc = propose(&f, &pr, 6);
	ok(rc == 1 && !strcmp(pr.failure.buf, "HTTP 400: bad <redacted>"),
	   "a 400 fails the experiment");
	proposal_release(&pr);
	propose(&f, &pr, 7);
	proposal_release(&pr);
	rc = propose(&f, &pr, 8);
	ok(rc == -1 && starts_with(pr.failure.buf, "giving up after 3 "
	   "requests in a row refused: HTTP 400"),
	   "three refused in a row stop the run");
	proposal_release(&pr);
	agent_free(f.a);

	strbuf_reset(&gitdir);
	strbuf_addf(&gitdir, "%s/.git", f.repo);
	ok(!tree_holds(gitdir.buf, KEY) && tree_holds(gitdir.buf, "<redacted>"),
	   "the key is nowhere in .git");

	git(NULL, "config", "autokernel.llm.url", "https://api.openai.com/v1/",
	    NULL);
	unsetenv("AUTOKERNEL_API_KEY");
	unsetenv("OPENAI_API_KEY");
	f.a = agent_new("llm");
	stderr_off();
	rc = f.a->init(f.a, 0, NULL);
	stderr_on();
	ok(rc < 0, "api.openai.com without a key: init fails");
	rc = propose(&f, &pr, 9);
	ok(rc == -1 && contains(pr.failure.buf, "no API key for "
	   "https://api.openai.com/v1: set AUTOKERNEL_API_KEY or "
	   "OPENAI_API_KEY"), "and propose says why: %s", pr.failure.buf);
	proposal_release(&pr);
	agent_free(f.a);
	strbuf_release(&sb);
	strbuf_release(&gitdir);
}

int main(void)
{
	char tmp[] = "/tmp/unit-llm.XXXXXX";
	char *src;

	test_whole_file();
	test_failures();
	test_search_replace();
	test_paths_and_redaction();
	test_backoff();
	test_retry_after();
	test_wire();

	if (!mkdtemp(tmp)) {
		skip("the HTTP side and the agent", "no temporary directory");
	} else if (mock_start(tmp) < 0) {
		skip("the HTTP side and the agent", "python3 or the mock is "
		     "not available");
	} else {
		/* the playbook and the header for the prompt */
		src = find_mock();
		if (src && strstr(src, "/tests/mock-llm.py")) {
			*strstr(src, "/tests/mock-llm.py") = '\0';
			setenv("AUTOKERNEL_HOME", src, 1);
		}
		free(src);
		setenv("GIT_CONFIG_NOSYSTEM", "1", 1);
		setenv("no_proxy", "127.0.0.1,localhost", 1);
		setenv("NO_PROXY", "127.0.0.1,localhost", 1);
		setenv("HOME", tmp, 1);
		test_http(tmp);
		test_agent(tmp);
		kill_child(&mock.c);
	}
	if (chdir("/") == 0)
		remove_tree(tmp);
	printf("1..%d\n", tests);
	return failed ? 1 : 0;
}
