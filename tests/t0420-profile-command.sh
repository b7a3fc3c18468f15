#!/bin/sh
# profile -- CMD: the command runs with the CUPTI injection library in its
# environment and its kernel records become the table.  No GPU here: a
# stand-in library file, and commands that write the records themselves
# (tests/gpu/t0400-profile-gpu.sh runs the real thing).  And --start.
. "$(dirname "$0")/lib.sh"

fx="$TEST_DIR/fixtures"

test_setup 'a stand-in injection library' '
	mkdir -p libexec &&
	: >libexec/libak-cupti.so &&
	AUTOKERNEL_LIBEXEC=$TRASH/libexec &&
	export AUTOKERNEL_LIBEXEC
'

test_expect_success 'the command runs under the injection library' '
	git autokernel profile -- sh -c "echo \"\$CUDA_INJECTION64_PATH\" >lib; \
		cat \"$fx/cupti-sample.jsonl\" >>\"\$AK_CUPTI_OUT\"" >out 2>err &&
	test "$(cat lib)" = "$TRASH/libexec/libak-cupti.so"
'

test_expect_success 'its kernels are ranked by name' '
	grep "0.500 ms of GPU kernel time in 8 kernels on NVIDIA H200" out &&
	grep -E "^matmul +60.0% +0.300 +3  - " out &&
	grep -E "^softmax +20.0% +0.100 +2 " out &&
	grep -E "^reduce +10.0% +0.050 +1 " out &&
	grep -E "^not covered +10.0% +0.050 +2  add_vectors 10.0%" out &&
	grep "kernel names carry none" out
'

test_expect_success 'a half-written last record is skipped with a warning' '
	grep "1 malformed kernel record skipped" err
'

test_expect_success '--json keeps the command output off stdout' '
	git autokernel profile --json -- sh -c "echo chatter; \
		cat \"$fx/cupti-sample.jsonl\" >>\"\$AK_CUPTI_OUT\"" \
		>out.json 2>err &&
	grep chatter err &&
	python3 "$fx/json-check.py" out.json <<-\EOF
	r["source"] == "cupti" and r["kernels"] == 8
	r["command"][0] == "sh"
	list(ops) == ["matmul", "softmax", "reduce"]
	op("matmul")["shape"] is None and op("matmul")["floor_ms"] is None
	near(op("matmul")["limit"], 2.5)
	EOF
'

test_expect_success 'by name: log-softmax then nll_loss is a cross-entropy' '
	git autokernel profile --json -- sh -c "cat \"$fx/cupti-ce.jsonl\" \
		>>\"\$AK_CUPTI_OUT\"" >ce.json &&
	python3 "$fx/json-check.py" ce.json <<-\EOF
	list(ops) == ["cross_entropy", "softmax"]
	near(op("cross_entropy")["share"], 0.5) and op("cross_entropy")["calls"] == 1
	op("cross_entropy")["kernels"] == 2
	near(op("softmax")["share"], 0.3)
	near(r["not_covered"]["share"], 0.2) and r["not_covered"]["top"][0]["name"].startswith("at::native::(anonymous namespace)::cunn_SoftMaxForward")
	EOF
'

test_expect_success 'a command that fails is an error naming its status' '
	test_expect_code 1 git autokernel profile -- sh -c "exit 3" 2>err &&
	grep "error: .sh. exited with 3" err
'

test_expect_success 'a command killed by a signal' '
	test_expect_code 1 git autokernel profile -- sh -c "kill -9 \$\$" 2>err &&
	grep "error: .sh. was killed by signal 9" err
'

test_expect_success 'a command that does not exist' '
	test_expect_code 1 git autokernel profile -- ./no-such-program 2>err &&
	grep "no-such-program" err
'

test_expect_success 'a command with no GPU work' '
	test_expect_code 1 git autokernel profile -- true 2>err &&
	grep "error: no GPU kernels recorded" err
'

test_expect_success 'autokernel.profileTimeout stops a command that hangs' '
	git config --global autokernel.profileTimeout 1 &&
	test_expect_code 1 git autokernel profile -- sleep 30 2>err &&
	git config --global --unset autokernel.profileTimeout &&
	grep "timed out after 1.0 s" err
'

test_expect_success 'without the injection library: exit 3' '
	mkdir -p nolib &&
	AUTOKERNEL_LIBEXEC=$TRASH/nolib test_expect_code 3 \
		git autokernel profile -- true 2>err &&
	grep "injection library .*libak-cupti.so. is missing" err
'

# A stand-in for python3: it writes the traces the start-up module would
# (python/ak_profile/sitecustomize.py, whose own test is t0430), one with
# kernels and one of a process that ran none, and says what it was given.
test_setup 'a stand-in python3 that writes torch.profiler traces' '
	mkdir -p fakebin &&
	cat >fakebin/python3 <<-EOF &&
	#!/bin/sh
	echo "PYTHONPATH=\$PYTHONPATH" >py-env
	echo "CUDA_INJECTION64_PATH=\$CUDA_INJECTION64_PATH" >>py-env
	gzip -dc "$fx/llama-trace.json.gz" >"\$AK_PROFILE_TRACE_DIR/trace-101.json"
	echo "[]" >"\$AK_PROFILE_TRACE_DIR/trace-102.json"
	EOF
	chmod +x fakebin/python3
'

test_expect_success 'a Python command: its torch.profiler traces make the table' '
	PATH="$TRASH/fakebin:$PATH" git autokernel profile --json -- \
		python3 model.py >py.json &&
	grep "^PYTHONPATH=$SRC_DIR/python/ak_profile" py-env &&
	grep "^CUDA_INJECTION64_PATH=$TRASH/libexec/libak-cupti.so" py-env &&
	git autokernel profile --json "$fx/llama-trace.json.gz" >trace.json &&
	python3 "$fx/compare-profiles.py" trace.json py.json 0 &&
	python3 "$fx/json-check.py" py.json <<-\EOF
	r["source"] == "torch" and r["command"] == ["python3", "model.py"]
	op("rotary_embedding")["layout"] == "half"
	op("rmsnorm")["floor_ms"] > 0
	EOF
'

test_expect_success 'the start-up module comes first on PYTHONPATH, then the user path' '
	PYTHONPATH=/mine PATH="$TRASH/fakebin:$PATH" git autokernel profile \
		-- python3 model.py >out &&
	grep "^PYTHONPATH=$SRC_DIR/python/ak_profile:/mine\$" py-env
'

test_expect_success 'a Python command needs no injection library' '
	AUTOKERNEL_LIBEXEC=$TRASH/nolib PATH="$TRASH/fakebin:$PATH" \
		git autokernel profile -- python3 model.py >out &&
	grep "^CUDA_INJECTION64_PATH=\$" py-env &&
	grep "^rmsnorm " out
'

test_expect_success '--start outside a repository' '
	test_expect_code 3 git autokernel profile --start 1 \
		"$fx/synthetic-small.json" >out 2>err &&
	grep "not a git repository" err
'

test_setup 'a repository, and the real runners for start' '
	new_repo repo &&
	unset AUTOKERNEL_LIBEXEC
'

test_expect_success '--start 1 starts the top op at its shape' '
	(cd repo && git autokernel profile --start 1 --backend host \
		"$fx/synthetic-small.json") >out &&
	grep "starting softmax (60.0% of GPU time) at 64x1000" out &&
	(cd repo && git rev-parse --verify -q autokernel/softmax &&
	 git show autokernel/softmax:softmax/problem.json) >problem &&
	grep "\"bench_shape\": \"64x1000\"" problem &&
	test "$(cd repo && git config autokernel.softmax.share)" = 0.6000 &&
	test "$(cd repo && git symbolic-ref --short HEAD)" = main
'

test_expect_success '--start 2 skips the started op and starts the next' '
	(cd repo && git autokernel profile --start 2 --backend host --json \
		"$fx/synthetic-small.json") >out.json 2>err &&
	grep "autokernel/softmax exists: skipped" err &&
	python3 "$fx/json-check.py" out.json <<-\EOF &&
	[(s["op"], s["status"]) for s in r["started"]] == [("softmax", "exists"), ("rmsnorm", "started")]
	EOF
	(cd repo && git show autokernel/rmsnorm:rmsnorm/problem.json) >problem &&
	grep "\"bench_shape\": \"64x512\"" problem &&
	test "$(cd repo && git config autokernel.rmsnorm.share)" = 0.3000 &&
	test "$(cd repo && git symbolic-ref --short HEAD)" = main &&
	(cd repo && git show autokernel/rmsnorm --stat) >stat &&
	! grep softmax/ stat
'

test_expect_success '--start gives a half-split rotary its layout' '
	(cd repo && git autokernel profile --start 1 --backend host \
		"$fx/synthetic-rotary.json") >out &&
	grep "starting rotary_embedding (100.0% of GPU time) at 1x2x16x32" out &&
	(cd repo && git show autokernel/rotary_embedding:rotary_embedding/problem.json) >problem &&
	grep "\"layout\": \"half\"" problem &&
	grep "\"bench_shape\": \"1x2x16x32\"" problem
'

test_done
