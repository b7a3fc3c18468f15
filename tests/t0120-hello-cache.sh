#!/bin/sh
# The runner opens its device while the kernel compiles: until it says
# hello, the last hello of this machine (in the cache) stands in for the
# device's name and arch.  What is recorded is always the device the
# runner found, and the cache follows it.
. "$(dirname "$0")/lib.sh"

test_setup 'a host softmax branch' '
	new_repo repo &&
	small_problem softmax >small.json &&
	cd repo &&
	git autokernel start softmax --backend host --problem ../small.json \
		>/dev/null 2>&1 &&
	cd ..
'

test_expect_success 'the first hello is cached' '
	ls "$AUTOKERNEL_CACHE"/hello-host-*.json >cached &&
	test $(wc -l <cached) = 1 &&
	grep "\"ok\": true" $(cat cached)
'

# the note of the experiment just judged: the new tip, or the attempt
last_note () {
	if test "$(git -C repo rev-parse HEAD)" != "$1"; then
		git -C repo notes --ref=autokernel show HEAD
	else
		git -C repo notes --ref=autokernel show refs/autokernel/attempts/softmax/1
	fi
}

test_expect_success 'a stale hello stands in; the real one is recorded and cached' '
	f=$(ls "$AUTOKERNEL_CACHE"/hello-host-*.json) &&
	real=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[\"name\"])" "$f") &&
	python3 -c "import json,sys; d=json.load(open(sys.argv[1])); d[\"name\"]=\"Stale Device\"; json.dump(d, open(sys.argv[1], \"w\"))" "$f" &&
	cp repo/.git/autokernel/device-host-*.json \
		repo/.git/autokernel/device-host-stale-device.json.new &&
	mv repo/.git/autokernel/device-host-stale-device.json.new \
		repo/.git/autokernel/device-host-stale-device.json &&
	head=$(git -C repo rev-parse HEAD) &&
	sed -i "s/^#define CHUNK 1024 /#define CHUNK 2048 /" repo/softmax/kernel.c &&
	(cd repo && git commit -q -a -m "bigger chunks" >../out 2>&1 || :) &&
	grep "on Stale Device" out &&
	last_note $head >note &&
	python3 -c "import json,sys; n=json.load(open(\"note\")); sys.exit(n[\"device\"][\"name\"] != sys.argv[1])" "$real" &&
	grep "\"name\": \"$real\"" "$f"
'

# A backend whose runner is built here but whose device cannot answer:
# CUDA with every GPU hidden, else HIP (CI has its runner, no AMD GPU).
if test -x "$AK_LIBEXEC/ak-runner-cuda"; then
	absent=cuda
elif test -x "$AK_LIBEXEC/ak-runner-hip"; then
	absent=hip
else
	absent=
fi

if test -n "$absent"; then
	test_expect_success "a cached $absent hello does not make a missing device answer" '
		cp "$(ls "$AUTOKERNEL_CACHE"/hello-host-*.json)" \
			"$AUTOKERNEL_CACHE/hello-$absent-$(uname -n).json" &&
		new_repo r2 && cd r2 &&
		CUDA_VISIBLE_DEVICES= HIP_VISIBLE_DEVICES=-1 ROCR_VISIBLE_DEVICES=-1 \
			test_expect_code 3 git autokernel start softmax --backend $absent 2>err &&
		grep "no $absent device" err &&
		! git rev-parse -q --verify autokernel/softmax &&
		! git rev-parse -q --verify refs/autokernel/attempts/softmax/1
	'
else
	test_skip "a cached hello does not make a missing device answer" "no GPU runner built"
fi

test_done
