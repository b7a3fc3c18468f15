#!/bin/sh
# run --agent llm against a scripted model on loopback (tests/mock-llm.py):
# a good reply is judged and lands in git under its hypothesis; retries,
# timeouts and every kind of bad reply end as a rejected experiment or a
# clean stop; both wire formats; the API key is never written anywhere.
. "$(dirname "$0")/lib.sh"

if ! command -v python3 >/dev/null 2>&1; then
	test_skip 'the llm agent' 'no python3 for the mock server'
	test_done
fi

KEY="sk-autokernel-test-$$-do-not-leak"
export AUTOKERNEL_API_KEY="$KEY" AUTOKERNEL_LLM_BACKOFF_MS=1
unset OPENAI_API_KEY ANTHROPIC_API_KEY
# the mock is on loopback, whatever proxy the machine uses
export no_proxy=127.0.0.1,localhost NO_PROXY=127.0.0.1,localhost

python3 "$TEST_DIR/mock-llm.py" --script "$TRASH/script.json" \
	--port-file "$TRASH/port" --log "$TRASH/requests.log" --idle 300 \
	</dev/null >"$TRASH/mock.out" 2>&1 &
MOCK_PID=$!
trap 'kill $MOCK_PID 2>/dev/null; cd /; rm -rf "$TRASH"' EXIT
echo '[]' >"$TRASH/script.json"
for i in $(seq 1 200); do
	test -s "$TRASH/port" && break
	sleep 0.1
done
PORT=$(cat "$TRASH/port")

# script JSON: the mock's next answers, and an empty request log
script () {
	printf '%s\n' "$1" >"$TRASH/script.new" &&
	mv "$TRASH/script.new" "$TRASH/script.json" &&
	: >"$TRASH/requests.log"
}

# reply FILE HYPOTHESIS KERNEL: a model's answer holding the whole file
reply () {
	{ echo "$2"; echo; echo "Here is the kernel."; echo; echo '```c'
	  cat "$3"; echo '```'; } >"$1"
}

# recorded SUBJECT: a kept commit or an attempt carries it
recorded () {
	{ git log --format=%s HEAD &&
	  git for-each-ref --format="%(subject)" refs/autokernel/attempts/
	} | grep -Fx "$1"
}

llm_run () {
	git autokernel run --agent llm --max-experiments 1 >>../run.out 2>&1
}

base="$TEST_DIR/kernels/softmax-f32.c"
small_problem softmax | sed -e 's/"f16", "bf16", "f32"/"f32"/' >small.json
# thirty times the work: the baseline a good candidate beats
sed -e 's|/\* BREAK \*/|{ static int d; if (d < 30) { d++; ak_kernel(a); d--; } }|' \
	"$base" >slow.c
sed -e 's|/\* BREAK \*/||' "$base" >fast.c

test_setup 'an experiment and a model on loopback' '
	test -n "$PORT" &&
	new_repo repo && cd repo &&
	git autokernel start softmax --backend host --from ../slow.c \
		--problem ../small.json >../start.out 2>&1 &&
	git config autokernel.llm.url "http://127.0.0.1:$PORT/v1" &&
	git config autokernel.llm.model mock-model &&
	git config autokernel.llm.retries 2 &&
	cd ..
'

test_expect_success 'a good reply is judged and kept under its hypothesis' '
	cd repo &&
	reply ../good.txt "Do the work once instead of thirty times" ../fast.c &&
	script "[{\"reply_file\": \"$TRASH/good.txt\"}]" &&
	llm_run &&
	test "$(git log -1 --format=%s)" = \
		"Do the work once instead of thirty times" &&
	cmp softmax/kernel.c ../fast.c &&
	git notes --ref=autokernel show HEAD >../note.json &&
	python3 -c "import json; t = json.load(open(\"../note.json\"))[\"tokens\"]; \
		assert t[\"input\"] == 1200 and t[\"output\"] == 340, t; \
		assert t[\"model\"] == \"mock-model\" and t[\"provider\"] == \"openai\", t" &&
	test -z "$(git status --porcelain --untracked-files=no)"
'

test_expect_success 'the request carries the prompt, the model and the key' '
	python3 - "$TRASH/requests.log" "$KEY" <<-\EOF
	import json, sys
	r = json.loads(open(sys.argv[1]).readline())
	assert r["path"] == "/v1/chat/completions", r["path"]
	assert r["headers"]["Authorization"] == "Bearer " + sys.argv[2]
	b = r["body"]
	assert b["model"] == "mock-model" and b["max_tokens"] == 16000, b
	assert abs(b["temperature"] - 0.7) < 1e-9, b
	system, user = b["messages"][0]["content"], b["messages"][1]["content"]
	assert "Reply format" in system
	for s in ("# Task", "## The kernel ABI", "## Playbook (host)",
		  "## History", "d < 30", "softmax/kernel.c",
		  "3. stability: large, mixed-scale, all-equal, all-zero, masked inputs"):
	    assert s in user, s
	EOF
'

test_expect_success 'transcripts and the prompt stay inside .git' '
	cd repo && ls .git/autokernel/transcripts/softmax/ >../list &&
	test -s ../list && grep "Bearer <redacted>" .git/autokernel/transcripts/softmax/* &&
	test -s .git/autokernel/prompt.md &&
	test -z "$(git status --porcelain)"
'

test_expect_success '429 then success: retried, then judged' '
	cd repo &&
	cat ../fast.c >k2.c && echo "/* variant 2 */" >>k2.c &&
	reply ../good2.txt "Mark the kernel as variant two" k2.c && rm k2.c &&
	script "[{\"status\": 429, \"headers\": {\"Retry-After\": \"0\"}, \
		\"json\": {\"error\": {\"message\": \"rate limited\"}}}, \
		{\"reply_file\": \"$TRASH/good2.txt\"}]" &&
	llm_run &&
	test $(wc -l <../requests.log) = 2 &&
	grep "HTTP 429 Too Many Requests: rate limited; retry 1 of 2" ../run.out &&
	recorded "Mark the kernel as variant two"
'

test_expect_success 'a request that times out is retried' '
	cd repo && git config autokernel.llm.timeout 1 &&
	cat ../fast.c >k3.c && echo "/* variant 3 */" >>k3.c &&
	reply ../good3.txt "Mark the kernel as variant three" k3.c && rm k3.c &&
	script "[{\"delay\": 3, \"reply\": \"too late\"}, \
		{\"reply_file\": \"$TRASH/good3.txt\"}]" &&
	llm_run && git config --unset autokernel.llm.timeout &&
	grep "no answer from .http://127.0.0.1:$PORT/v1/chat/completions. within 1 s" \
		../run.out &&
	recorded "Mark the kernel as variant three"
'

test_expect_success 'repeated 500s stop the run cleanly, naming the status' '
	cd repo && git rev-parse HEAD >../before &&
	script "[{\"status\": 500, \"repeat\": 10}]" &&
	test_expect_code 1 git autokernel run --agent llm --max-experiments 3 \
		>../out 2>../err &&
	grep "giving up after 2 retries: HTTP 500 Internal Server Error" ../err &&
	test $(wc -l <../requests.log) = 3 &&
	git rev-parse HEAD | cmp - ../before &&
	test -z "$(git status --porcelain)"
'

# bad REPLY-SCRIPT MESSAGE: one experiment that fails on the agent's side
bad () {
	git rev-parse HEAD >../before &&
	script "$1" &&
	git autokernel run --agent llm --max-experiments 1 >../out 2>&1 &&
	grep "rejected (agent): $2" ../out &&
	git rev-parse HEAD | cmp - ../before &&
	test -z "$(git status --porcelain)"
}

test_expect_success 'malformed JSON fails one experiment' '
	cd repo && bad "[{\"body\": \"{not json\"}]" \
		"malformed JSON in the server.s answer"
'

test_expect_success 'a reply without a code block fails one experiment' '
	cd repo && bad "[{\"reply\": \"I would unroll the loop.\"}]" \
		"no code block in the reply"
'

test_expect_success 'a reply that edits another file fails one experiment' '
	cd repo && bad "[{\"reply\": \"Unroll\\n\`\`\`c other/file.c\\nint \
ak_kernel;\\n\`\`\`\\n\"}]" \
		"the reply edits .other/file.c., not softmax/kernel.c" &&
	! test -e other
'

test_expect_success 'a huge reply fails one experiment' '
	cd repo && bad "[{\"reply\": \"Huge\\n\`\`\`c\\n\", \"pad\": 2200000}]" \
		"reply of 2.1 MB is over the 512 KB limit"
'

test_expect_success 'a 400 fails one experiment with the server message' '
	cd repo && bad "[{\"status\": 400, \"json\": {\"error\": {\"message\": \
\"prompt is too long\"}}}]" "HTTP 400: prompt is too long"
'

test_expect_success 'a 401 stops the run at once' '
	cd repo &&
	script "[{\"status\": 401, \"json\": {\"error\": {\"message\": \
\"Incorrect API key provided: $KEY\"}}}]" &&
	test_expect_code 1 git autokernel run --agent llm --max-experiments 3 \
		>../out 2>../err &&
	grep "HTTP 401 Unauthorized: Incorrect API key provided: <redacted>" ../err &&
	test $(wc -l <../requests.log) = 1
'

test_expect_success 'the Anthropic wire format' '
	cd repo && git config autokernel.llm.provider anthropic &&
	cat ../fast.c >k4.c && echo "/* variant 4 */" >>k4.c &&
	reply ../good4.txt "Mark the kernel as variant four" k4.c && rm k4.c &&
	script "[{\"reply_file\": \"$TRASH/good4.txt\"}]" &&
	llm_run && git config --unset autokernel.llm.provider &&
	recorded "Mark the kernel as variant four" &&
	python3 - "$TRASH/requests.log" "$KEY" <<-\EOF
	import json, sys
	r = json.loads(open(sys.argv[1]).readline())
	h = {k.lower(): v for k, v in r["headers"].items()}
	assert r["path"] == "/v1/messages", r["path"]
	assert h["x-api-key"] == sys.argv[2] and "authorization" not in h, h
	assert h["anthropic-version"] == "2023-06-01", h
	b = r["body"]
	assert "Reply format" in b["system"] and len(b["messages"]) == 1, b
	assert b["messages"][0]["role"] == "user" and b["max_tokens"] == 16000
	fixed, changing = b["messages"][0]["content"]
	assert fixed["cache_control"] == {"type": "ephemeral"}, fixed
	assert "# Task" in fixed["text"] and "## Playbook" in fixed["text"]
	assert changing["text"].startswith("## Where the kernel stands")
	EOF
'

test_expect_success 'no model: a clear error before anything runs' '
	cd repo && git config --unset autokernel.llm.model &&
	test_must_fail git autokernel run --agent llm --max-experiments 1 \
		>../out 2>../err &&
	git config autokernel.llm.model mock-model &&
	grep "no model: set autokernel.llm.model" ../err
'

test_expect_success 'no key for a hosted API: a clear error' '
	cd repo && (
		unset AUTOKERNEL_API_KEY &&
		git config autokernel.llm.url https://api.openai.com/v1 &&
		test_must_fail git autokernel run --agent llm \
			--max-experiments 1 >../out 2>../err
	) &&
	git config autokernel.llm.url "http://127.0.0.1:$PORT/v1" &&
	grep "no API key for https://api.openai.com/v1: set AUTOKERNEL_API_KEY or OPENAI_API_KEY" ../err
'

test_expect_success 'a local server needs no key' '
	cd repo &&
	cat ../fast.c >k5.c && echo "/* variant 5 */" >>k5.c &&
	reply ../good5.txt "Mark the kernel as variant five" k5.c && rm k5.c &&
	script "[{\"reply_file\": \"$TRASH/good5.txt\"}]" &&
	(unset AUTOKERNEL_API_KEY && llm_run) &&
	recorded "Mark the kernel as variant five" &&
	python3 -c "import json, sys; \
		r = json.loads(open(\"../requests.log\").readline()); \
		assert \"Authorization\" not in r[\"headers\"], r[\"headers\"]"
'

test_expect_success 'log sums the tokens' '
	cd repo && git autokernel log --attempts >../log &&
	git autokernel log --attempts --json >../log.json &&
	grep "^tokens: [1-9][0-9]* in, [1-9][0-9]* out" ../log &&
	! grep -F "$KEY" ../log ../log.json
'

test_expect_success 'the key is nowhere in git, notes, logs or output' '
	cd repo &&
	git cat-file --batch-all-objects --batch >../objects &&
	test -s ../objects && ! grep -F "$KEY" ../objects &&
	! grep -rF "$KEY" .git &&
	! grep -F "$KEY" ../out ../err ../run.out ../start.out &&
	git notes --ref=autokernel list >../notes && test -s ../notes &&
	test -z "$(git status --porcelain)"
'

test_done
