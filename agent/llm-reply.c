/*
 * llm-reply.c: a model's text -> the new kernel and the hypothesis.
 * The rules are in llm-reply.h.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "agent/llm-reply.h"

struct line {
	size_t start, end;              /* end excludes the '\n' */
};

struct block {                          /* a fenced code block */
	size_t open, close;             /* line numbers; close == nr: open */
	size_t indent;
	char *info;                     /* trimmed info string */
};

struct sr {                             /* a SEARCH/REPLACE block */
	size_t search, divider, replace; /* marker line numbers */
};

struct text {
	struct strbuf t;
	struct line *l;
	size_t nr, alloc;
	unsigned char *code;            /* per line: inside a fence or SR */
	struct block *b;
	size_t nb, balloc;
	struct sr *s;
	size_t ns, salloc;
};

void llm_edit_release(struct llm_edit *e)
{
	strbuf_release(&e->kernel);
	strbuf_release(&e->hypothesis);
	e->blocks = 0;
}

void llm_human_size(char *buf, size_t n, size_t bytes)
{
	if (bytes < 1024)
		snprintf(buf, n, "%zu bytes", bytes);
	else if (bytes < 1024 * 1024)
		snprintf(buf, n, "%.0f KB", bytes / 1024.0);
	else
		snprintf(buf, n, "%.1f MB", bytes / (1024.0 * 1024.0));
}

static void replace_all(struct strbuf *sb, const char *what, const char *with)
{
	struct strbuf out = STRBUF_INIT;
	size_t wl = strlen(what);
	const char *p = sb->buf, *hit;

	if (!wl || !strstr(sb->buf, what))
		return;
	while ((hit = strstr(p, what)) != NULL) {
		strbuf_add(&out, p, hit - p);
		strbuf_addstr(&out, with);
		p = hit + wl;
	}
	strbuf_addstr(&out, p);
	strbuf_release(sb);
	*sb = out;
}

void llm_redact(struct strbuf *sb, const char *key)
{
	struct strbuf esc = STRBUF_INIT;

	if (!key || !*key)
		return;
	replace_all(sb, key, "<redacted>");
	/* the form the key takes inside a JSON string */
	for (const char *p = key; *p; p++) {
		if (*p == '"' || *p == '\\')
			strbuf_addch(&esc, '\\');
		if ((unsigned char)*p < 0x20)
			strbuf_addf(&esc, "\\u%04x", (unsigned char)*p);
		else
			strbuf_addch(&esc, *p);
	}
	if (strcmp(esc.buf, key))
		replace_all(sb, esc.buf, "<redacted>");
	strbuf_release(&esc);
}

/* The length of the UTF-8 sequence at s (n bytes left), 0 if invalid. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
	size_t len;
	unsigned min;

	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		len = 2, min = 0x80;
	else if (s[0] >= 0xe0 && s[0] <= 0xef)
		len = 3, min = 0x800;
	else if (s[0] >= 0xf0 && s[0] <= 0xf4)
		len = 4, min = 0x10000;
	else
		return 0;
	if (n < len)
		return 0;
	{
		unsigned cp = s[0] & (0x7f >> len);

		for (size_t i = 1; i < len; i++) {
			if ((s[i] & 0xc0) != 0x80)
				return 0;
			cp = cp << 6 | (s[i] & 0x3f);
		}
		if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
			return 0;
	}
	return len;
}

void llm_utf8_fix(struct strbuf *sb)
{
	unsigned char *s = (unsigned char *)sb->buf;

	for (size_t i = 0; i < sb->len;) {
		size_t n = utf8_len(s + i, sb->len - i);

		if (!n || (n == 1 && !s[i])) {
			s[i++] = '?';
			continue;
		}
		i += n;
	}
}

/* ---- paths ---- */

/* A file name as a model writes one: "kernel.cu", "softmax/kernel.cu". */
static int pathlike(const char *s, size_t len)
{
	size_t dot = 0, i;
	int slash = 0, alnum = 0, has_dot = 0;

	if (!len || len > 255)
		return 0;
	for (i = 0; i < len; i++) {
		unsigned char c = s[i];

		if (isalnum(c))
			alnum = 1;
		else if (c == '/')
			slash = 1;
		else if (c == '.')
			dot = i, has_dot = 1;
		else if (!strchr("_-+~", c))
			return 0;
	}
	if (!alnum)
		return 0;
	if (slash)
		return 1;
	if (!has_dot || dot == 0 || len - dot - 1 < 1 || len - dot - 1 > 8)
		return 0;
	for (i = dot + 1; i < len; i++)
		if (!isalnum((unsigned char)s[i]))
			return 0;
	return 1;
}

int llm_path_is_kernel(const char *path, const char *kernel_rel)
{
	size_t pl, kl;

	while (starts_with(path, "./"))
		path += 2;
	pl = strlen(path);
	kl = strlen(kernel_rel);
	if (!strcmp(path, kernel_rel))
		return 1;
	/* "kernel.cu" for "softmax/kernel.cu" */
	if (kl > pl && kernel_rel[kl - pl - 1] == '/' &&
	    !strcmp(kernel_rel + kl - pl, path))
		return 1;
	/* "b/softmax/kernel.cu", "/home/me/repo/softmax/kernel.cu" */
	if (pl > kl && path[pl - kl - 1] == '/' &&
	    !strcmp(path + pl - kl, kernel_rel))
		return 1;
	return 0;
}

/* "file", "filename", "path" or "title" and then sep, skipped. */
static int skip_label(const char **s, const char *sep)
{
	static const char *const labels[] = { "filename", "file", "path",
					      "title", NULL };

	for (int i = 0; labels[i]; i++) {
		size_t n = strlen(labels[i]);

		if (!strncasecmp(*s, labels[i], n) &&
		    starts_with(*s + n, sep)) {
			*s += n + strlen(sep);
			return 1;
		}
	}
	return 0;
}

/* A line that holds nothing but a file name ("softmax/kernel.cu:",
 * "**File: `kernel.cu`**"): the name into path, 1; else 0. */
static int path_only_line(const char *s, size_t len, struct strbuf *path)
{
	struct strbuf sb = STRBUF_INIT;
	const char *p, *e;
	int ret = 0;

	strbuf_add(&sb, s, len);
	p = sb.buf;
	e = sb.buf + sb.len;
	while (p < e && strchr(" \t#>*`\"'-", *p))
		p++;
	if (skip_label(&p, ":"))
		while (p < e && strchr(" \t*`\"'", *p))
			p++;
	while (e > p && strchr(" \t:*`\"'", e[-1]))
		e--;
	if (pathlike(p, e - p)) {
		strbuf_reset(path);
		strbuf_add(path, p, e - p);
		ret = 1;
	}
	strbuf_release(&sb);
	return ret;
}

/* The file an info string names ("cuda softmax/kernel.cu",
 * "c title=\"kernel.c\"", "cuda:kernel.cu"): into path, 1; else 0. */
static int info_path(const char *info, struct strbuf *path)
{
	const char *p = info;

	while (*p) {
		const char *tok, *end, *colon;

		while (*p == ' ' || *p == '\t')
			p++;
		tok = p;
		while (*p && *p != ' ' && *p != '\t')
			p++;
		end = p;
		if (tok == end)
			break;
		skip_label(&tok, "=");
		while (tok < end && strchr("\"'{", *tok))
			tok++;
		while (end > tok && strchr("\"'}", end[-1]))
			end--;
		colon = memchr(tok, ':', end - tok);
		if (colon)
			tok = colon + 1;
		if (pathlike(tok, end - tok)) {
			strbuf_reset(path);
			strbuf_add(path, tok, end - tok);
			return 1;
		}
	}
	return 0;
}

/* ---- splitting the text ---- */

static const char *line_ptr(const struct text *x, size_t i)
{
	return x->t.buf + x->l[i].start;
}

static size_t line_len(const struct text *x, size_t i)
{
	return x->l[i].end - x->l[i].start;
}

/* A fence line: ``` or ~~~ (3 or more), any indentation.  Its char and
 * run length, the indentation and the info string's span. */
static int fence_line(const char *s, size_t len, char *ch, size_t *run,
		      size_t *indent, size_t *info, size_t *info_end)
{
	size_t i = 0, r = 0;

	while (i < len && (s[i] == ' ' || s[i] == '\t'))
		i++;
	if (i == len || (s[i] != '`' && s[i] != '~'))
		return 0;
	*ch = s[i];
	*indent = i;
	while (i + r < len && s[i + r] == *ch)
		r++;
	if (r < 3)
		return 0;
	*run = r;
	i += r;
	while (i < len && (s[i] == ' ' || s[i] == '\t'))
		i++;
	*info = i;
	*info_end = len;
	while (*info_end > i && strchr(" \t", s[*info_end - 1]))
		(*info_end)--;
	/* CommonMark: a backtick fence's info has no backtick */
	if (*ch == '`' && memchr(s + i, '`', *info_end - i))
		return 0;
	return 1;
}

/* "<<<<<<< SEARCH", "=======", ">>>>>>> REPLACE" (5 to 9 marks). */
static int marker(const char *s, size_t len, char c, const char *word)
{
	size_t i = 0, r = 0, wl = strlen(word);

	while (i < len && (s[i] == ' ' || s[i] == '\t'))
		i++;
	while (i + r < len && s[i + r] == c)
		r++;
	if (r < 5 || r > 9)
		return 0;
	i += r;
	while (i < len && s[i] == ' ')
		i++;
	if (len - i < wl || strncmp(s + i, word, wl))
		return 0;
	i += wl;
	while (i < len && strchr(" \t", s[i]))
		i++;
	return i == len;
}

/* Copies the reply with CRLF made LF and <think>...</think> dropped. */
static void normalize(struct strbuf *out, const char *reply, size_t len)
{
	const char *p, *open, *close;

	for (size_t i = 0; i < len; i++)
		if (reply[i] != '\r' || i + 1 == len || reply[i + 1] != '\n')
			strbuf_addch(out, reply[i] ? reply[i] : ' ');
	while ((open = strstr(out->buf, "<think>")) != NULL) {
		size_t at = open - out->buf, to;

		close = strstr(open, "</think>");
		to = close ? (size_t)(close - out->buf) + 8 : out->len;
		p = out->buf + to;
		memmove(out->buf + at, p, out->len - to + 1);
		out->len -= to - at;
	}
}

static void split(struct text *x)
{
	size_t i = 0;

	while (i < x->t.len) {
		const char *eol = memchr(x->t.buf + i, '\n', x->t.len - i);
		size_t end = eol ? (size_t)(eol - x->t.buf) : x->t.len;

		ALLOC_GROW(x->l, x->nr + 1, x->alloc);
		x->l[x->nr].start = i;
		x->l[x->nr].end = end;
		x->nr++;
		i = end + 1;
	}
	x->code = xcalloc(x->nr + 1, 1);
}

static void find_blocks(struct text *x)
{
	struct block *open = NULL;
	char och = 0;
	size_t orun = 0;

	for (size_t i = 0; i < x->nr; i++) {
		const char *s = line_ptr(x, i);
		size_t len = line_len(x, i), run, indent, info, info_end;
		char ch;

		if (open) {
			x->code[i] = 1;
			if (fence_line(s, len, &ch, &run, &indent, &info,
				       &info_end) && ch == och && run >= orun &&
			    info == info_end) {
				open->close = i;
				open = NULL;
			}
			continue;
		}
		if (!fence_line(s, len, &ch, &run, &indent, &info, &info_end))
			continue;
		ALLOC_GROW(x->b, x->nb + 1, x->balloc);
		open = &x->b[x->nb++];
		open->open = i;
		open->close = x->nr;
		open->indent = indent;
		open->info = xstrndup(s + info, info_end - info);
		och = ch;
		orun = run;
		x->code[i] = 1;
	}
}

/* 0, or 1 with why when a block is not terminated. */
static int find_sr(struct text *x, int truncated, struct strbuf *why)
{
	for (size_t i = 0; i < x->nr; i++) {
		struct sr s;
		size_t j;

		if (!marker(line_ptr(x, i), line_len(x, i), '<', "SEARCH"))
			continue;
		s.search = i;
		for (j = i + 1; j < x->nr; j++)
			if (marker(line_ptr(x, j), line_len(x, j), '=', ""))
				break;
		s.divider = j;
		for (j++; j < x->nr; j++)
			if (marker(line_ptr(x, j), line_len(x, j), '>',
				   "REPLACE"))
				break;
		if (j >= x->nr) {
			strbuf_addf(why, "SEARCH/REPLACE block %zu is not "
				    "terminated%s", x->ns + 1, truncated ?
				    " (the reply was cut off at the token "
				    "limit)" : "");
			return 1;
		}
		s.replace = j;
		for (size_t k = i; k <= j; k++)
			x->code[k] = 1;
		ALLOC_GROW(x->s, x->ns + 1, x->salloc);
		x->s[x->ns++] = s;
		i = j;
	}
	return 0;
}

static void text_release(struct text *x)
{
	for (size_t i = 0; i < x->nb; i++)
		free(x->b[i].info);
	free(x->b);
	free(x->s);
	free(x->l);
	free(x->code);
	strbuf_release(&x->t);
}

/* ---- the hypothesis ---- */

static void clean_hypothesis(struct strbuf *h, const char *s, size_t len)
{
	struct strbuf sb = STRBUF_INIT;
	const char *p, *e;

	for (size_t i = 0; i < len; i++) {
		unsigned char c = s[i];

		if (c < 0x20 || c == 0x7f)
			c = ' ';
		if (c == ' ' && sb.len && sb.buf[sb.len - 1] == ' ')
			continue;
		strbuf_addch(&sb, c);
	}
	p = sb.buf;
	e = sb.buf + sb.len;
	for (;;) {
		const char *before = p;

		while (p < e && strchr(" #>*_", *p))
			p++;
		if (e - p > 2 && strchr("-+", *p) && p[1] == ' ')
			p += 2;
		while (p < e && isdigit((unsigned char)*p) && e - p > 3 &&
		       (p[1] == '.' || p[1] == ')') && p[2] == ' ')
			p += 3;
		if (e - p >= 10 && !strncasecmp(p, "hypothesis", 10)) {
			const char *q = p + 10;

			while (q < e && strchr(" *_", *q))
				q++;
			if (q < e && (*q == ':' || *q == '-'))
				p = q + 1;
		}
		if (p == before)
			break;
	}
	while (e > p && strchr(" *_", e[-1]))
		e--;
	strbuf_reset(h);
	if (e - p > LLM_HYPOTHESIS_MAX) {
		const char *cut = p + LLM_HYPOTHESIS_MAX;

		/* a word boundary if there is one late enough, else a
		 * character boundary of UTF-8 */
		while (cut > p + LLM_HYPOTHESIS_MAX * 3 / 4 && *cut != ' ')
			cut--;
		if (*cut != ' ') {
			cut = p + LLM_HYPOTHESIS_MAX;
			while (cut > p && ((unsigned char)*cut & 0xc0) == 0x80)
				cut--;
		}
		e = cut;
		while (e > p && e[-1] == ' ')
			e--;
	}
	strbuf_add(h, p, e - p);
	strbuf_release(&sb);
}

static void find_hypothesis(struct strbuf *h, const struct text *x)
{
	struct strbuf path = STRBUF_INIT;

	for (size_t i = 0; i < x->nr; i++) {
		if (x->code[i] ||
		    path_only_line(line_ptr(x, i), line_len(x, i), &path))
			continue;
		clean_hypothesis(h, line_ptr(x, i), line_len(x, i));
		if (h->len)
			break;
	}
	if (!h->len)
		strbuf_addstr(h, "unexplained edit (the reply gave no "
			      "hypothesis)");
	strbuf_release(&path);
}

/* ---- what a block names ---- */

/* The path on the last non-blank line before line i, if it is alone. */
static int path_before(const struct text *x, size_t i, struct strbuf *path)
{
	while (i-- > 0) {
		const char *s = line_ptr(x, i);
		size_t len = line_len(x, i), k = 0;

		while (k < len && strchr(" \t", s[k]))
			k++;
		if (k == len)
			continue;
		return !x->code[i] && path_only_line(s, len, path);
	}
	return 0;
}

static int is_diff_info(const char *info)
{
	return starts_with(info, "diff") || starts_with(info, "patch") ||
		starts_with(info, "udiff");
}

/* A unified diff in lines [from, to): the file it changes into path, 1;
 * 0 when it is not a diff. */
static int diff_path(const struct text *x, size_t from, size_t to,
		     int outside, struct strbuf *path)
{
	int diff = 0;

	for (size_t i = from; i < to; i++) {
		const char *s = line_ptr(x, i), *p, *end;
		size_t len = line_len(x, i);

		if (outside && x->code[i])
			continue;

		if (len >= 4 &&
		    (!strncmp(s, "+++ ", 4) || !strncmp(s, "--- ", 4)))
			p = s + 4;
		else if (len >= 11 && !strncmp(s, "diff --git ", 11))
			p = memchr(s + 11, ' ', len - 11);
		else if (len >= 3 && !strncmp(s, "@@ ", 3)) {
			diff = 1;
			continue;
		} else
			continue;
		if (!p)
			continue;
		while (*p == ' ')
			p++;
		end = p;
		while (end < s + len && *end != '\t' && *end != ' ')
			end++;
		if ((end - p == 9 && !strncmp(p, "/dev/null", 9)) ||
		    !pathlike(p, end - p))
			continue;
		diff = 1;
		/* git's a/ and b/ prefixes */
		if (end - p > 2 && (p[0] == 'a' || p[0] == 'b') && p[1] == '/')
			p += 2;
		strbuf_reset(path);
		strbuf_add(path, p, end - p);
		if (s[0] == '+' || s[0] == 'd')
			return 1;       /* the new side is the one edited */
	}
	return diff;
}

static int other_file(struct strbuf *why, const char *path,
		      const char *kernel_rel)
{
	if (llm_path_is_kernel(path, kernel_rel))
		return 0;
	strbuf_addf(why, "the reply edits '%s', not %s", path, kernel_rel);
	return 1;
}

/* Languages a block of something other than the kernel is tagged with. */
static int other_language(const char *info)
{
	static const char *const names[] = {
		"bash", "sh", "shell", "zsh", "console", "terminal", "text",
		"txt", "plaintext", "json", "python", "py", "yaml", "yml",
		"make", "makefile", "cmake", "output", "log", "diff", "patch",
		"udiff", NULL
	};
	size_t n = strcspn(info, " \t:{");

	for (int i = 0; names[i]; i++)
		if (strlen(names[i]) == n && !strncasecmp(info, names[i], n))
			return 1;
	return 0;
}

/* Every diff in the reply, fenced or not, must be for the kernel. */
static int check_diffs(const struct text *x, const char *kernel_rel,
		       struct strbuf *why)
{
	struct strbuf path = STRBUF_INIT;
	int ret = 0;

	for (size_t i = 0; i < x->nb && !ret; i++) {
		const struct block *b = &x->b[i];

		if (diff_path(x, b->open + 1, b->close, 0, &path) && path.len)
			ret = other_file(why, path.buf, kernel_rel);
	}
	if (!ret && diff_path(x, 0, x->nr, 1, &path) && path.len)
		ret = other_file(why, path.buf, kernel_rel);
	strbuf_release(&path);
	return ret;
}

/* ---- whole file ---- */

static void block_text(const struct text *x, const struct block *b,
		       struct strbuf *out)
{
	size_t end = b->close < x->nr ? b->close : x->nr;

	for (size_t i = b->open + 1; i < end; i++) {
		const char *s = line_ptr(x, i);
		size_t len = line_len(x, i), k = 0;

		/* the fence's indentation, as CommonMark strips it */
		while (k < b->indent && k < len && s[k] == ' ')
			k++;
		strbuf_add(out, s + k, len - k);
		strbuf_addch(out, '\n');
	}
}

static int whole_file(struct llm_edit *out, const struct text *x,
		      const char *kernel_rel, int truncated,
		      struct strbuf *why)
{
	struct strbuf path = STRBUF_INIT;
	const struct block *b = NULL;
	int ret = 1;

	if (!x->nb) {
		strbuf_addstr(why, truncated ? "the reply was cut off at the "
			      "token limit before its code block (raise "
			      "autokernel.llm.maxTokens)" :
			      "no code block in the reply");
		goto cleanup;
	}
	for (size_t i = x->nb; i-- > 0 && !b;)
		if (!other_language(x->b[i].info))
			b = &x->b[i];
	if (!b)
		b = &x->b[x->nb - 1];
	if ((info_path(b->info, &path) || path_before(x, b->open, &path)) &&
	    other_file(why, path.buf, kernel_rel))
		goto cleanup;
	if (is_diff_info(b->info) ||
	    diff_path(x, b->open + 1, b->close, 0, &path)) {
		strbuf_addf(why, "the reply is a diff; it must hold the whole "
			    "of %s (or SEARCH/REPLACE blocks)", kernel_rel);
		goto cleanup;
	}
	if (b->close == x->nr && truncated) {
		strbuf_addstr(why, "the reply was cut off at the token limit "
			      "inside its code block (raise "
			      "autokernel.llm.maxTokens)");
		goto cleanup;
	}
	block_text(x, b, &out->kernel);
	ret = 0;
cleanup:
	strbuf_release(&path);
	return ret;
}

/* ---- SEARCH/REPLACE ---- */

static void add_lines(struct strbuf *out, const struct text *x, size_t from,
		      size_t to)
{
	for (size_t i = from; i < to; i++) {
		strbuf_add(out, line_ptr(x, i), line_len(x, i));
		strbuf_addch(out, '\n');
	}
}

static size_t rstrip_len(const char *s, size_t len)
{
	while (len && (s[len - 1] == ' ' || s[len - 1] == '\t' ||
		       s[len - 1] == '\r'))
		len--;
	return len;
}

/* Where the lines of search match text, ignoring trailing blanks: the
 * byte span of the one match in *at, *to; the number of matches. */
static int match_lines(const char *text, const char *search, size_t *at,
		       size_t *to)
{
	int n = 0;

	for (const char *t = text; *t;) {
		const char *tp = t, *sp = search;

		while (*sp) {
			const char *te = strchrnul(tp, '\n');
			const char *se = strchrnul(sp, '\n');
			size_t tl = rstrip_len(tp, te - tp);
			size_t sl = rstrip_len(sp, se - sp);

			if (!*tp || tl != sl || memcmp(tp, sp, tl))
				break;
			tp = *te ? te + 1 : te;
			sp = *se ? se + 1 : se;
		}
		if (!*sp) {
			if (!n++) {
				*at = t - text;
				*to = tp - text;
			}
		}
		t = strchrnul(t, '\n');
		if (*t)
			t++;
	}
	return n;
}

static int count_exact(const char *text, const char *search, size_t *at)
{
	const char *p = text, *hit;
	size_t sl = strlen(search);
	int n = 0;

	while ((hit = strstr(p, search)) != NULL) {
		if (!n++)
			*at = hit - text;
		p = hit + sl;
	}
	return n;
}

static int apply_one(struct strbuf *k, const char *search,
		     const char *replace, size_t idx, const char *kernel_rel,
		     struct strbuf *why)
{
	struct strbuf out = STRBUF_INIT;
	size_t at = 0, to = 0;
	int n = count_exact(k->buf, search, &at);

	if (n == 1) {
		to = at + strlen(search);
	} else if (n == 0) {
		n = match_lines(k->buf, search, &at, &to);
	}
	if (n != 1) {
		size_t fl = strcspn(search, "\n");

		if (n > 1)
			strbuf_addf(why, "SEARCH block %zu matches %d places "
				    "in %s; it needs more context", idx, n,
				    kernel_rel);
		else
			strbuf_addf(why, "SEARCH block %zu does not match %s "
				    "(its first line: '%.*s')", idx, kernel_rel,
				    (int)(fl > 80 ? 80 : fl), search);
		return 1;
	}
	strbuf_add(&out, k->buf, at);
	strbuf_addstr(&out, replace);
	strbuf_addstr(&out, k->buf + to);
	strbuf_release(k);
	*k = out;
	return 0;
}

/* The path a SEARCH block is for: a fence's info string or the path on the
 * line before the fence or before the block itself. */
static int sr_path(const struct text *x, const struct sr *s,
		   struct strbuf *path)
{
	for (size_t i = 0; i < x->nb; i++) {
		const struct block *b = &x->b[i];

		if (b->open < s->search && s->search < b->close)
			return info_path(b->info, path) ||
				path_before(x, b->open, path);
	}
	return path_before(x, s->search, path);
}

static int search_replace(struct llm_edit *out, const struct text *x,
			  const char *kernel_rel, const char *current,
			  struct strbuf *why)
{
	struct strbuf search = STRBUF_INIT, replace = STRBUF_INIT;
	struct strbuf path = STRBUF_INIT;
	int ret = 0;

	strbuf_addstr(&out->kernel, current);
	for (size_t i = 0; i < x->ns && !ret; i++) {
		const struct sr *s = &x->s[i];

		strbuf_reset(&search);
		strbuf_reset(&replace);
		if (sr_path(x, s, &path) &&
		    (ret = other_file(why, path.buf, kernel_rel)))
			break;
		add_lines(&search, x, s->search + 1, s->divider);
		add_lines(&replace, x, s->divider + 1, s->replace);
		if (!search.len) {
			strbuf_addf(why, "SEARCH block %zu is empty", i + 1);
			ret = 1;
			break;
		}
		ret = apply_one(&out->kernel, search.buf, replace.buf, i + 1,
				kernel_rel, why);
	}
	out->blocks = (int)x->ns;
	strbuf_release(&search);
	strbuf_release(&replace);
	strbuf_release(&path);
	return ret;
}

/* ---- the whole reply ---- */

static int check_kernel(struct llm_edit *out, const char *kernel_rel,
			const char *current, struct strbuf *why)
{
	char size[32];
	size_t i = 0;

	while (i < out->kernel.len &&
	       isspace((unsigned char)out->kernel.buf[i]))
		i++;
	if (i == out->kernel.len) {
		strbuf_addstr(why, "the reply's code block is empty");
		return 1;
	}
	if (out->kernel.buf[out->kernel.len - 1] != '\n')
		strbuf_addch(&out->kernel, '\n');
	if (out->kernel.len > LLM_KERNEL_MAX) {
		llm_human_size(size, sizeof(size), out->kernel.len);
		strbuf_addf(why, "kernel of %s is over the %d KB limit", size,
			    LLM_KERNEL_MAX / 1024);
		return 1;
	}
	if (!strcmp(out->kernel.buf, current)) {
		strbuf_addf(why, "the reply does not change %s", kernel_rel);
		return 1;
	}
	if (strstr(current, "ak_kernel") && !strstr(out->kernel.buf,
						      "ak_kernel")) {
		strbuf_addstr(why, "the reply's code block does not define "
			      "ak_kernel(): it must be the whole file, not a "
			      "fragment");
		return 1;
	}
	return 0;
}

int llm_reply_parse(struct llm_edit *out, const char *reply, size_t len,
		    const char *kernel_rel, const char *current, int truncated,
		    struct strbuf *why)
{
	struct text x = { .t = STRBUF_INIT };
	char size[32];
	int ret = 1;

	strbuf_reset(&out->kernel);
	strbuf_reset(&out->hypothesis);
	out->blocks = 0;
	if (len > LLM_REPLY_MAX) {
		llm_human_size(size, sizeof(size), len);
		strbuf_addf(why, "reply of %s is over the %d KB limit", size,
			    LLM_REPLY_MAX / 1024);
		return 1;
	}
	normalize(&x.t, reply, len);
	strbuf_trim(&x.t);
	if (!x.t.len) {
		strbuf_addstr(why, truncated ? "empty reply (the model spent "
			      "its whole token limit; raise "
			      "autokernel.llm.maxTokens)" : "empty reply");
		goto cleanup;
	}
	split(&x);
	find_blocks(&x);
	if (find_sr(&x, truncated, why) || check_diffs(&x, kernel_rel, why))
		goto cleanup;
	if (x.ns)
		ret = search_replace(out, &x, kernel_rel, current, why);
	else
		ret = whole_file(out, &x, kernel_rel, truncated, why);
	if (!ret)
		ret = check_kernel(out, kernel_rel, current, why);
	if (!ret)
		find_hypothesis(&out->hypothesis, &x);
cleanup:
	if (ret) {
		strbuf_reset(&out->kernel);
		strbuf_reset(&out->hypothesis);
	}
	text_release(&x);
	return ret;
}
