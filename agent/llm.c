/* placeholder until the llm agent lands; replaced by its real file */
#include "agent.h"
#include "usage.h"

struct agent *agent_llm_new(void)
{
	error("the llm agent is not built yet");
	return NULL;
}
