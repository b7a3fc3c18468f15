/*
 * tunables.c: parsing the tunable lines of a kernel, evaluating their
 * constraints (a small recursive-descent evaluator over longs) and
 * rewriting the values in place.
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include "agent/tunables.h"

#define MARK "autokernel: tune"

static const char *skip_ws(const char *p)
{
	while (*p == ' ' || *p == '\t')
		p++;
	return p;
}

static int parse_ident(const char **pp, char *out, size_t n)
{
	const char *p = *pp;
	size_t len = 0;

	if (!isalpha((unsigned char)*p) && *p != '_')
		return -1;
	while (isalnum((unsigned char)p[len]) || p[len] == '_')
		len++;
	if (len >= n)
		return -1;
	memcpy(out, p, len);
	out[len] = '\0';
	*pp = p + len;
	return 0;
}

static int parse_long(const char **pp, long *out)
{
	char *end;

	*out = strtol(*pp, &end, 0);
	if (end == *pp)
		return -1;
	*pp = end;
	return 0;
}

/*
 * Where the value of a constant's line starts: after "#define NAME" in C,
 * after "NAME =" at the start of a Python line (a module-level constant,
 * so not indented); its name into name.  NULL when the line declares no
 * constant.
 */
static const char *value_at(const char *line, char *name, size_t n)
{
	const char *p = skip_ws(line);

	if (!strncmp(p, "#define", 7)) {
		p = skip_ws(p + 7);
		return parse_ident(&p, name, n) < 0 ? NULL : skip_ws(p);
	}
	p = line;
	if (parse_ident(&p, name, n) < 0)
		return NULL;
	p = skip_ws(p);
	if (*p != '=' || p[1] == '=')
		return NULL;
	return skip_ws(p + 1);
}

/* One line: 0 not a tunable, 1 a tunable, -1 a malformed one. */
static int parse_line(struct tunable *tu, const char *line, const char *eol,
		      struct strbuf *err, int lineno)
{
	char buf[1024];
	const char *p, *mark, *close;
	size_t len = (size_t)(eol - line);

	if (len >= sizeof(buf))
		return 0;
	memcpy(buf, line, len);
	buf[len] = '\0';
	mark = strstr(buf, MARK);
	memset(tu, 0, sizeof(*tu));
	tu->line = lineno;
	if (!mark || !(p = value_at(buf, tu->name, sizeof(tu->name))))
		return 0;
	if (parse_long(&p, &tu->value) < 0)
		goto bad;
	p = skip_ws(mark + strlen(MARK));
	close = strstr(p, "*/");
	if (!close)
		close = p + strlen(p);
	while (p < close) {
		if (tu->n_values == TUNE_MAX_VALUES ||
		    parse_long(&p, &tu->values[tu->n_values++]) < 0)
			goto bad;
		p = skip_ws(p);
		if (*p == ',') {
			p = skip_ws(p + 1);
			continue;
		}
		if (!strncmp(p, "if", 2) && !isalnum((unsigned char)p[2])) {
			size_t n = (size_t)(close - (p + 2));

			if (n >= sizeof(tu->cond))
				goto bad;
			memcpy(tu->cond, p + 2, n);
			tu->cond[n] = '\0';
		}
		break;
	}
	if (!tu->n_values)
		goto bad;
	return 1;
bad:
	strbuf_addf(err, "line %d: malformed tunable (want '#define NAME "
		    "VALUE' or 'NAME = VALUE' and a comment '%s V1,V2,... "
		    "[if EXPR]')", lineno, MARK);
	return -1;
}

int tunables_parse(struct tunables *t, const char *text, struct strbuf *err)
{
	const char *p = text;
	int lineno = 0;

	t->n = 0;
	while (*p) {
		const char *eol = strchrnul(p, '\n');
		struct tunable tu;
		int r;

		lineno++;
		r = parse_line(&tu, p, eol, err, lineno);
		if (r < 0)
			return -1;
		if (r > 0) {
			for (int i = 0; i < t->n; i++)
				if (!strcmp(t->p[i].name, tu.name)) {
					strbuf_addf(err, "line %d: '%s' is "
						    "declared twice", lineno,
						    tu.name);
					return -1;
				}
			if (t->n == TUNE_MAX_PARAMS) {
				strbuf_addf(err, "more than %d tunables",
					    TUNE_MAX_PARAMS);
				return -1;
			}
			t->p[t->n++] = tu;
		}
		p = *eol ? eol + 1 : eol;
	}
	return 0;
}

/* ---- constraint expressions ---- */

struct expr {
	const char *p;
	const struct tunables *t;
	struct strbuf *err;
	int failed;
};

static long parse_or(struct expr *e);

static void expr_fail(struct expr *e, const char *what)
{
	if (!e->failed)
		strbuf_addf(e->err, "%s at '%.20s'", what, e->p);
	e->failed = 1;
}

static int accept(struct expr *e, const char *op)
{
	e->p = skip_ws(e->p);
	if (strncmp(e->p, op, strlen(op)))
		return 0;
	/* '<' must not eat the first half of '<=' and so on */
	if (strlen(op) == 1 && strchr("<>=!&|", *op) && e->p[1] == '=')
		return 0;
	if ((!strcmp(op, "&") || !strcmp(op, "|")) && e->p[1] == *op)
		return 0;
	e->p += strlen(op);
	return 1;
}

static long parse_primary(struct expr *e)
{
	char name[64];
	long v;

	e->p = skip_ws(e->p);
	if (accept(e, "(")) {
		v = parse_or(e);
		if (!accept(e, ")"))
			expr_fail(e, "missing ')'");
		return v;
	}
	if (accept(e, "!"))
		return !parse_primary(e);
	if (accept(e, "-"))
		return -parse_primary(e);
	if (isdigit((unsigned char)*e->p)) {
		if (parse_long(&e->p, &v) < 0)
			expr_fail(e, "bad number");
		return v;
	}
	if (parse_ident(&e->p, name, sizeof(name)) == 0) {
		for (int i = 0; i < e->t->n; i++)
			if (!strcmp(e->t->p[i].name, name))
				return e->t->p[i].value;
		expr_fail(e, "unknown name");
		return 0;
	}
	expr_fail(e, "syntax error");
	return 0;
}

static long parse_mul(struct expr *e)
{
	long v = parse_primary(e);

	for (;;) {
		if (accept(e, "*")) {
			v *= parse_primary(e);
		} else if (accept(e, "/") || accept(e, "%")) {
			int mod = e->p[-1] == '%';
			long d = parse_primary(e);

			if (!d) {
				expr_fail(e, "division by zero");
				return 0;
			}
			v = mod ? v % d : v / d;
		} else {
			return v;
		}
	}
}

static long parse_add(struct expr *e)
{
	long v = parse_mul(e);

	for (;;) {
		if (accept(e, "+"))
			v += parse_mul(e);
		else if (accept(e, "-"))
			v -= parse_mul(e);
		else
			return v;
	}
}

static long parse_cmp(struct expr *e)
{
	long v = parse_add(e);

	for (;;) {
		if (accept(e, "<="))
			v = v <= parse_add(e);
		else if (accept(e, ">="))
			v = v >= parse_add(e);
		else if (accept(e, "=="))
			v = v == parse_add(e);
		else if (accept(e, "!="))
			v = v != parse_add(e);
		else if (accept(e, "<"))
			v = v < parse_add(e);
		else if (accept(e, ">"))
			v = v > parse_add(e);
		else
			return v;
	}
}

static long parse_and(struct expr *e)
{
	long v = parse_cmp(e);

	while (accept(e, "&&")) {
		long r = parse_cmp(e);

		v = v && r;
	}
	return v;
}

static long parse_or(struct expr *e)
{
	long v = parse_and(e);

	while (accept(e, "||")) {
		long r = parse_and(e);

		v = v || r;
	}
	return v;
}

int tune_eval(const char *expr, const struct tunables *t, long *out,
	      struct strbuf *err)
{
	struct expr e = { expr, t, err, 0 };

	*out = parse_or(&e);
	if (!e.failed && *skip_ws(e.p))
		expr_fail(&e, "unexpected text");
	return e.failed ? -1 : 0;
}

int tunables_valid(const struct tunables *t, struct strbuf *err)
{
	for (int i = 0; i < t->n; i++) {
		long v;

		if (!t->p[i].cond[0])
			continue;
		if (tune_eval(t->p[i].cond, t, &v, err) < 0) {
			strbuf_insert_front(err, ": ");
			strbuf_insert_front(err, t->p[i].name);
			return -1;
		}
		if (!v)
			return 0;
	}
	return 1;
}

void tunables_apply(struct strbuf *out, const char *text,
		    const struct tunables *t)
{
	const char *p = text;
	int lineno = 0;

	while (*p) {
		const char *eol = strchrnul(p, '\n');
		const struct tunable *tu = NULL;

		lineno++;
		for (int i = 0; i < t->n; i++)
			if (t->p[i].line == lineno)
				tu = &t->p[i];
		if (tu) {
			/* keep the line's layout: only the number changes */
			char name[64];
			const char *num = value_at(p, name, sizeof(name));
			const char *end = num;

			if (*end == '-' || *end == '+')
				end++;
			while (isalnum((unsigned char)*end))
				end++;
			strbuf_add(out, p, num - p);
			strbuf_addf(out, "%ld", tu->value);
			strbuf_add(out, end, eol - end);
		} else {
			strbuf_add(out, p, eol - p);
		}
		if (*eol)
			strbuf_addch(out, '\n');
		p = *eol ? eol + 1 : eol;
	}
}

void tunables_key(struct strbuf *out, const struct tunables *t)
{
	for (int i = 0; i < t->n; i++)
		strbuf_addf(out, "%s%s=%ld", i ? "," : "", t->p[i].name,
			    t->p[i].value);
}
