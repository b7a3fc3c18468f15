#!/bin/sh
# profile on bad input: every case is a clear error, exit 1 (2 for usage),
# never a crash or a table of nothing.
. "$(dirname "$0")/lib.sh"

fx="$TEST_DIR/fixtures"

test_expect_success 'no arguments is a usage error' '
	test_expect_code 2 git autokernel profile 2>err &&
	grep "usage: git autokernel profile" err
'

test_expect_success 'two traces is a usage error' '
	test_expect_code 2 git autokernel profile a.json b.json 2>err &&
	grep "usage:" err
'

test_expect_success 'a command missing after -- is a usage error' '
	test_expect_code 2 git autokernel profile -- 2>err &&
	grep "usage:" err
'

test_expect_success '--start needs a count' '
	test_expect_code 2 git autokernel profile --start x t.json 2>err &&
	grep "start needs a count of ops, not .x." err &&
	test_expect_code 2 git autokernel profile --start 0 t.json 2>err
'

test_expect_success '-h shows the usage on stdout' '
	git autokernel profile -h >out &&
	grep "Amdahl" out
'

test_expect_success 'a missing trace' '
	test_expect_code 1 git autokernel profile nosuch.json 2>err &&
	grep "unable to open .nosuch.json." err
'

test_expect_success 'an empty file' '
	: >empty.json &&
	test_expect_code 1 git autokernel profile empty.json 2>err &&
	grep "error: .empty.json. is empty" err &&
	gzip -c empty.json >empty.json.gz &&
	test_expect_code 1 git autokernel profile empty.json.gz 2>err &&
	grep "is empty" err
'

test_expect_success 'a truncated trace names the line and column' '
	head -c 20000 "$fx/synthetic-trace.json" >cut.json &&
	lines=$(wc -l <cut.json) &&
	test_expect_code 1 git autokernel profile cut.json 2>err &&
	grep "error: .cut.json.: malformed JSON at line $((lines + 1)), column [0-9]*: " err
'

test_expect_success 'malformed JSON in the middle' '
	n=$(grep -n "\"ts\":" "$fx/synthetic-trace.json" | sed -n "20s/:.*//p") &&
	sed -e "${n}s/\"ts\":/\"ts\" /" "$fx/synthetic-trace.json" >bad.json &&
	test_expect_code 1 git autokernel profile bad.json 2>err &&
	grep "malformed JSON at line $n, column" err
'

test_expect_success 'a truncated gzip' '
	gzip -c "$fx/synthetic-trace.json" >full.gz &&
	head -c 3000 full.gz >cut.gz &&
	test_expect_code 1 git autokernel profile cut.gz 2>err &&
	grep "error: .cut.gz.: corrupt gzip data: unexpected end of file" err
'

test_expect_success 'corrupt gzip data' '
	cp full.gz bad.gz &&
	printf "\377\377\377\377\377\377\377\377" |
		dd of=bad.gz bs=1 seek=2000 conv=notrunc 2>/dev/null &&
	test_expect_code 1 git autokernel profile bad.gz 2>err &&
	grep "error: .bad.gz.: corrupt gzip data: " err
'

test_expect_success 'JSON that is not a trace' '
	echo "{\"a\": 1}" >other.json &&
	test_expect_code 1 git autokernel profile other.json 2>err &&
	grep "not a chrome trace" err
'

test_expect_success 'a trace with no GPU kernel events' '
	python3 -c "import json; t = json.load(open(\"$fx/synthetic-trace.json\")); \
		t[\"traceEvents\"] = [e for e in t[\"traceEvents\"] \
				      if e.get(\"cat\") != \"kernel\"]; \
		json.dump(t, open(\"cpu.json\", \"w\"))" &&
	test_expect_code 1 git autokernel profile cpu.json 2>err &&
	grep "has no GPU kernel events" err
'

test_expect_success 'a trace that is a bare event array works' '
	python3 -c "import json; t = json.load(open(\"$fx/synthetic-trace.json\")); \
		json.dump(t[\"traceEvents\"], open(\"array.json\", \"w\"))" &&
	git autokernel profile array.json >out &&
	grep -E "^fused_mlp +34.0%" out
'

test_expect_success 'a trace without shapes has no floors but still ranks' '
	python3 -c "import json; t = json.load(open(\"$fx/synthetic-trace.json\")); \
		[e.get(\"args\", {}).pop(k, None) for e in t[\"traceEvents\"] \
		 for k in (\"Input Dims\", \"Input type\")]; \
		json.dump(t, open(\"noshape.json\", \"w\"))" &&
	git autokernel profile noshape.json >out &&
	grep -E "^fused_mlp +34.0% +0.340 +1  - " out &&
	grep "record_shapes=True" out
'

test_done
