#!/bin/sh
# demo: a scratch repository, softmax on the host (no GPU here), a short
# tuning session with at least one kept improvement, and the log.
. "$(dirname "$0")/lib.sh"

test_expect_success 'demo runs the whole loop and keeps an improvement' '
	git autokernel demo --dir demo --backend host --max-experiments 6 \
		>out 2>err &&
	grep "the demo repository is $TRASH/demo" out &&
	grep "autokernel/softmax: " out &&
	cd demo && git autokernel log --json >../log.json &&
	python3 -c "import json; r=json.load(open(\"../log.json\")); \
		assert r[0][\"status\"] == \"baseline\"; \
		assert any(x[\"status\"] == \"kept\" for x in r[1:]), r"
'

test_done
