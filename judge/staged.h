/*
 * staged.h: one candidate judged against the branch, as the hooks and
 * `start` need it, and the messages that carry the result into git.
 *
 *	json_t *res;
 *	rc = experiment_judge(&res, "softmax", &tree, &head, stderr);
 *	// 0: res["keep"] says kept or rejected; AK_EUSAGE: refused (bad
 *	// paths, an unreadable problem.json), AK_EENV: no device or
 *	// toolchain, after an error message; res is NULL unless rc == 0
 */
#ifndef JUDGE_STAGED_H
#define JUDGE_STAGED_H

#include <stdio.h>
#include <git2.h>
#include <jansson.h>
#include "lib/result.h"
#include "lib/strbuf.h"

int experiment_judge(json_t **res, const char *name, const git_oid *tree,
		     const git_oid *head, FILE *out);


/* A kept candidate's message: the hypothesis, a body (the bench's
 * figures, when res has a bench), the trailers. */
void experiment_kept_message(struct strbuf *msg, const struct result *res);
/* A rejected one's: the hypothesis, the verdict, the trailers. */
void experiment_attempt_message(struct strbuf *out, const char *msg,
				const struct result *res);

#endif
