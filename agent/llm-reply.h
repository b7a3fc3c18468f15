/*
 * llm-reply.h: what the llm agent makes of a model's text, free of I/O so
 * that tests/unit-llm.c can check every rule.
 *
 * A reply is asked for in one form (the rules of llm.c's prompt): its
 * first line outside code is the hypothesis, its last fenced code block
 * the whole new kernel file.  Also accepted: aider-style SEARCH/REPLACE
 * blocks, applied to the current kernel in order, each SEARCH matching
 * exactly one place (trailing blanks on a line forgiven):
 *
 *	<<<<<<< SEARCH
 *	lines of the kernel as they are
 *	=======
 *	the lines that replace them
 *	>>>>>>> REPLACE
 *
 * Anything else is a failure of the experiment, never a crash: an empty
 * reply, no code block, a block that names another file (its info string,
 * a path alone on the line before it, a diff header), a diff instead of a
 * file, a fragment without ak_kernel(), no change, a reply over
 * LLM_REPLY_MAX or a kernel over LLM_KERNEL_MAX.  Reasoning that local
 * models wrap in <think>...</think> is dropped first.
 *
 *	struct llm_edit e = LLM_EDIT_INIT;
 *	struct strbuf why = STRBUF_INIT;
 *	if (llm_reply_parse(&e, text, len, "softmax/kernel.cu", current,
 *			    truncated, &why))
 *		fail(why.buf);          // "no code block in the reply"
 *	else
 *		write(e.kernel.buf), commit(e.hypothesis.buf);
 *	llm_edit_release(&e);
 */
#ifndef LLM_REPLY_H
#define LLM_REPLY_H

#include <stddef.h>
#include "lib/strbuf.h"

#define LLM_REPLY_MAX (512 * 1024)
#define LLM_KERNEL_MAX (256 * 1024)
#define LLM_HYPOTHESIS_MAX 200

struct llm_edit {
	struct strbuf kernel;           /* the new kernel file */
	struct strbuf hypothesis;       /* one line, never empty on success */
	int blocks;                     /* SEARCH/REPLACE blocks, or 0 */
};
#define LLM_EDIT_INIT { STRBUF_INIT, STRBUF_INIT, 0 }
void llm_edit_release(struct llm_edit *e);

/*
 * Parses reply (len bytes, need not be NUL-terminated) against the kernel
 * file kernel_rel whose text is current.  truncated: the model stopped at
 * its token limit, which turns an unclosed block into a failure.  0 with
 * out filled, or 1 with the reason in why (one line, for the record).
 */
int llm_reply_parse(struct llm_edit *out, const char *reply, size_t len,
		    const char *kernel_rel, const char *current, int truncated,
		    struct strbuf *why);

/* Whether path (as a model writes it: "kernel.cu", "b/softmax/kernel.cu",
 * an absolute path) names the file kernel_rel. */
int llm_path_is_kernel(const char *path, const char *kernel_rel);

/* Replaces every occurrence of key in sb with "<redacted>", and its JSON
 * escaped form too; nothing for a NULL or empty key. */
void llm_redact(struct strbuf *sb, const char *key);

/* Replaces each byte that is not part of valid UTF-8 with '?', so that
 * any kernel or compiler message can go into a JSON request. */
void llm_utf8_fix(struct strbuf *sb);

/* "812 bytes", "300 KB", "2.1 MB" into buf. */
void llm_human_size(char *buf, size_t n, size_t bytes);

#endif
