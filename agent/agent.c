#include <stdlib.h>
#include <string.h>
#include "agent/agent.h"

void proposal_release(struct proposal *pr)
{
	strbuf_release(&pr->hypothesis);
	strbuf_release(&pr->failure);
	json_decref(pr->usage);
	pr->usage = NULL;
}

struct agent *agent_new(const char *name)
{
	if (!strcmp(name, "tune"))
		return agent_tune_new();
	if (!strcmp(name, "exec"))
		return agent_exec_new();
	if (!strcmp(name, "llm"))
		return agent_llm_new();
	return NULL;
}

void agent_free(struct agent *a)
{
	if (!a)
		return;
	if (a->release)
		a->release(a);
	free(a);
}
