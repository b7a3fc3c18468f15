# tests/cell-lib.sh: the cases of the cell around candidate code
# (doc/sandbox.md) on one backend, for t0160 (host) and gpu/t0640
# (CUDA).  Sourced after lib.sh, with these set:
#
#	backend=cuda ext=cu cc_var=AUTOKERNEL_NVCC
#	base=$TEST_DIR/kernels/softmax-f32.cu   # a softmax to break
#	marker='/\* HOST_BREAK \*/'             # host code at its entry
#	slow='for (...) softmax_rows<<<...>>>(...);'  # the work, many times
#	cell_cases
#
# A kernel that looks for secrets in its environment, writes outside
# its scratch directory (and reads its parent's environment), connects
# to a listener on 127.0.0.1, or #includes a secret file gets nothing
# out: not into the output, .git, the notes or the llm agent's next
# prompt; no file is written; no connection arrives.  Each evil kernel
# crashes after trying, so what it saw reaches its verdict, and each is
# also run with the cell off, to show it would have got out.  An honest
# kernel still builds, passes and is kept.

SECRET="sk-cell-$$-do-not-leak"
FILE_SECRET="AK_FILE_SECRET_$$_do_not_leak"
export AUTOKERNEL_API_KEY="$SECRET-autokernel" OPENAI_API_KEY="$SECRET-openai"
export MY_SERVICE_TOKEN="$SECRET-token" DB_PASSWORD="$SECRET-password"
export no_proxy=127.0.0.1,localhost NO_PROXY=127.0.0.1,localhost

# A listener on loopback that logs every connection it accepts, and the
# mock model of t0500, which logs the prompts it is sent.
start_listeners () {
	cat >listen.py <<-'EOF'
	import os, socket, sys
	s = socket.socket()
	s.bind(("127.0.0.1", 0))
	s.listen(8)
	s.settimeout(300)
	open(sys.argv[1] + ".new", "w").write(str(s.getsockname()[1]))
	os.rename(sys.argv[1] + ".new", sys.argv[1])
	while True:
	    try:
	        c, a = s.accept()
	    except socket.timeout:
	        break
	    with open(sys.argv[2], "a") as log:
	        log.write("connection from %s:%d\n" % a)
	    c.close()
	EOF
	python3 listen.py "$TRASH/lport" "$TRASH/connections" </dev/null \
		>/dev/null 2>&1 &
	LISTEN_PID=$!
	echo '[]' >script.json
	python3 "$TEST_DIR/mock-llm.py" --script "$TRASH/script.json" \
		--port-file "$TRASH/mport" --log "$TRASH/requests.log" \
		--idle 300 </dev/null >/dev/null 2>&1 &
	MOCK_PID=$!
	trap 'kill $LISTEN_PID $MOCK_PID 2>/dev/null; cd /; rm -rf "$TRASH"' EXIT
	for i in $(seq 1 200); do
		test -s "$TRASH/lport" && test -s "$TRASH/mport" && break
		sleep 0.1
	done
	LPORT=$(cat "$TRASH/lport") MPORT=$(cat "$TRASH/mport")
}

# evil NAME: NAME.$ext, the prelude NAME.pre, then the softmax, which
# calls evil() first
evil () {
	{ cat "$1.pre" && sed -e "s|$marker|evil();|" \
		-e 's|/\* [A-Z_]*BREAK \*/||g' "$base"; } >"$1.$ext"
}

write_kernels () {
	sed -e "s|$marker|$slow|" -e 's|/\* [A-Z_]*BREAK \*/||g' "$base" \
		>slow.$ext
	sed -e 's|/\* [A-Z_]*BREAK \*/||g' "$base" >fast.$ext
	echo "$FILE_SECRET" >secret.txt
	{ echo "#include \"$TRASH/secret.txt\"" && cat fast.$ext; } \
		>include.$ext

	cat >env.pre <<-EOF
	#include <stdio.h>
	#include <stdlib.h>
	#include <string.h>
	extern char **environ;
	static void evil(void)
	{
		FILE *f = fopen("$TRASH/env-dump", "w");

		for (char **e = environ; *e; e++)
			if (strstr(*e, "KEY") || strstr(*e, "TOKEN") ||
			    strstr(*e, "SECRET") || strstr(*e, "PASSWORD")) {
				fprintf(stderr, "%s\n", *e);
				if (f)
					fprintf(f, "%s\n", *e);
			}
		fprintf(stderr, "looked through the environment\n");
		abort();
	}
	EOF
	evil env

	cat >outside.pre <<-EOF
	#include <stdio.h>
	#include <stdlib.h>
	#include <unistd.h>
	static void evil(void)
	{
		const char *path[] = { "$TRASH/written", "$HOME/written",
				       "$TRASH/repo/written" };
		char env[4096] = "", proc[64];
		FILE *f;

		for (int i = 0; i < 3; i++)
			if ((f = fopen(path[i], "w"))) {
				fprintf(stderr, "wrote %s\n", path[i]);
				fclose(f);
			}
		snprintf(proc, sizeof(proc), "/proc/%d/environ", (int)getppid());
		if ((f = fopen(proc, "r"))) {
			size_t n = fread(env, 1, sizeof(env) - 1, f);

			for (size_t i = 0; i < n; i++)
				if (!env[i])
					env[i] = ' ';
			fprintf(stderr, "parent: %s\n", env);
		}
		fprintf(stderr, "tried the files\n");
		abort();
	}
	EOF
	evil outside

	cat >net.pre <<-EOF
	#include <arpa/inet.h>
	#include <errno.h>
	#include <netinet/in.h>
	#include <stdio.h>
	#include <stdlib.h>
	#include <string.h>
	#include <sys/socket.h>
	static void evil(void)
	{
		struct sockaddr_in a;
		int s = socket(AF_INET, SOCK_STREAM, 0);

		memset(&a, 0, sizeof(a));
		a.sin_family = AF_INET;
		a.sin_port = htons($LPORT);
		a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		if (s < 0 || connect(s, (struct sockaddr *)&a, sizeof(a)) < 0)
			fprintf(stderr, "no connection: %s\n", strerror(errno));
		else
			fprintf(stderr, "connected\n");
		abort();
	}
	EOF
	evil net

	# a compiler that fails with its environment's secrets as errors
	cat >envcc <<-'EOF'
	#!/bin/sh
	test "$1" = --version && echo "envcc 1" && exit 0
	env | grep -E "KEY|TOKEN|SECRET|PASSWORD" | sed -e "s/^/error: /"
	echo "error: the compiler looked"
	exit 1
	EOF
	chmod +x envcc
}

# problem: the branch's problem.json
problem () {
	small_problem softmax | sed -e 's/"f16", "bf16", "f32"/"f32"/' \
		-e "s/\"backend\": \"host\"/\"backend\": \"$backend\"/" \
		-e "s/\"kernel.c\"/\"kernel.$ext\"/"
}

# kernel_dir DIR KERNEL: a plain directory to verify
kernel_dir () {
	mkdir -p "$1/softmax" && cp small.json "$1/softmax/problem.json" &&
	cp "$2" "$1/softmax/kernel.$ext"
}

# unconfined DIR: verify DIR/softmax with the cell off; it fails
unconfined () {
	test_must_fail git -c autokernel.sandbox=false autokernel verify \
		"$1/softmax" >ctl 2>&1
}

# nowhere WORD: WORD is in no output kept under out/, no file of the
# repository's .git, no object of it (notes and attempts among them),
# and no prompt the model was sent
nowhere () {
	! grep -rF "$1" out repo/.git &&
	! (cd repo && git cat-file --batch-all-objects --batch) | grep -F "$1" &&
	! { test ! -e requests.log || python3 -c "import json, sys
for line in open(sys.argv[1]):
    print(json.dumps(json.loads(line)[\"body\"]))" requests.log; } |
		grep -F "$1"
}

# try NAME [CONFIG]: commits NAME.$ext on the branch (git -c CONFIG), the
# hook rejects it; its output in out/NAME, its attempt's note (the whole
# verdict) in out/NAME.note
try () {
	(cd repo && cp "../$1.$ext" softmax/kernel.$ext &&
	 test_must_fail git ${2:+-c "$2"} commit -q -m "try $1" \
		softmax/kernel.$ext >"../out/$1" 2>&1 &&
	 n=$(git for-each-ref refs/autokernel/attempts/softmax/ | wc -l) &&
	 git notes --ref=autokernel show refs/autokernel/attempts/softmax/$n \
		>"../out/$1.note")
}

# wait_for FILE: until FILE is not empty, for 5 s at most
wait_for () {
	for i in $(seq 1 50); do test -s "$1" && return 0; sleep 0.1; done
	return 1
}

cell_cases () {
	if ! command -v python3 >/dev/null 2>&1; then
		test_skip 'the cell' 'no python3 for the listener and the model'
		return
	fi
	start_listeners
	write_kernels
	problem >small.json
	mkdir out

	test_setup "a $backend branch, a listener and a model on loopback" '
		test -n "$LPORT" && test -n "$MPORT" &&
		new_repo repo && cd repo &&
		git autokernel start softmax --backend $backend \
			--from ../slow.$ext --problem ../small.json \
			>../out/start 2>&1 &&
		git config autokernel.llm.url "http://127.0.0.1:$MPORT/v1" &&
		git config autokernel.llm.model mock-model &&
		cd .. &&
		python3 -c "import socket; socket.create_connection((\"127.0.0.1\", $LPORT))" &&
		wait_for connections && : >connections
	'
	landlock=yes
	grep "no Landlock on this kernel" out/start >/dev/null && landlock=

	test_expect_success 'an honest kernel builds, passes and is kept' '
		cd repo && cp ../fast.$ext softmax/kernel.$ext &&
		git commit -q -m "do the work once" softmax/kernel.$ext \
			>../out/honest 2>&1 &&
		grep "verdict: keep" ../out/honest &&
		git notes --ref=autokernel show HEAD | grep "\"status\": \"kept\""
	'

	test_expect_success 'a kernel that reads its environment finds no secret' '
		try env && grep "looked through the environment" out/env.note &&
		nowhere "$SECRET" && ! grep -F "$SECRET" env-dump
	'

	test_expect_success 'the same kernel, unconfined, would have found them' '
		kernel_dir ctl-env env.$ext && unconfined ctl-env &&
		grep -F "OPENAI_API_KEY=$SECRET-openai" ctl &&
		grep "autokernel.sandbox is off: the candidate ran unconfined" ctl &&
		rm -f env-dump
	'

	if test -n "$landlock"; then
		test_expect_success 'a kernel writes nothing outside its cell' '
			try outside && grep "tried the files" out/outside.note &&
			! test -e written && ! test -e "$HOME/written" &&
			! test -e repo/written &&
			! grep "wrote /" out/outside.note && nowhere "$SECRET"
		'
		test_expect_success 'and unconfined it would have' '
			kernel_dir ctl-outside outside.$ext &&
			unconfined ctl-outside && test -e written &&
			rm -f written "$HOME/written" repo/written
		'
	else
		test_skip 'a kernel writes nothing outside its cell' \
			'no Landlock here'
	fi

	test_expect_success 'a kernel'"'"'s connection to 127.0.0.1 never arrives' '
		try net && grep "no connection: Permission denied" out/net.note &&
		sleep 0.5 && ! grep "connection from" connections
	'

	test_expect_success 'unconfined, it would have' '
		kernel_dir ctl-net net.$ext && unconfined ctl-net &&
		wait_for connections && grep "connection from" connections
	'

	test_expect_success 'the compiler gets no secret either' '
		kernel_dir ccdir fast.$ext &&
		test_expect_code 1 env $cc_var="$TRASH/envcc" git autokernel \
			verify --build-only ccdir/softmax >out/envcc 2>&1 &&
		grep "error: the compiler looked" out/envcc &&
		nowhere "$SECRET"
	'

	test_expect_success 'a kernel that includes a secret file shows none of it' '
		try include && grep "unable to build" out/include &&
		grep "softmax/kernel.$ext" out/include &&
		nowhere "$FILE_SECRET"
	'

	test_expect_success 'not even with the cell off' '
		{ cat include.$ext && echo "/* unconfined */"; } \
			>include-off.$ext &&
		try include-off autokernel.sandbox=false &&
		grep "autokernel.sandbox is off: the candidate ran unconfined" \
			out/include-off &&
		grep "unable to build" out/include-off.note &&
		grep "\"sandbox\": false" out/include-off.note &&
		nowhere "$FILE_SECRET"
	'

	test_expect_success 'the model'"'"'s next prompt holds the verdict, no secret' '
		{ echo "Break it"; echo; echo "\`\`\`c"; echo "this is not C;";
		  echo "\`\`\`"; } >broken.txt &&
		printf "[{\"reply_file\": \"%s\"}]\n" "$TRASH/broken.txt" \
			>script.new &&
		mv script.new script.json &&
		(cd repo && AUTOKERNEL_API_KEY=mock-key git autokernel run \
			--agent llm --max-experiments 1 >../out/run 2>&1) &&
		grep "unable to build" requests.log &&
		nowhere "$SECRET" && nowhere "$FILE_SECRET"
	'
}
