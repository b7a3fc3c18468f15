#!/bin/sh
# The cell around candidate code (doc/sandbox.md): a kernel that looks
# for secrets in its environment, writes outside its scratch directory,
# connects to a listener on 127.0.0.1 or #includes a secret file gets
# nothing out, not into the output, .git, the notes or the llm agent's
# next prompt; the file is not written; the connection never arrives.
# An honest kernel still builds, passes and is kept.  Each evil kernel
# crashes after trying, so what it saw reaches its verdict; each is
# also run with the cell off, to show it would have got out.
. "$(dirname "$0")/lib.sh"

if ! command -v python3 >/dev/null 2>&1; then
	test_skip 'the cell' 'no python3 for the listener and the mock model'
	test_done
fi

SECRET="sk-cell-$$-do-not-leak"
FILE_SECRET="AK_FILE_SECRET_$$_do_not_leak"
export AUTOKERNEL_API_KEY="$SECRET-autokernel" OPENAI_API_KEY="$SECRET-openai"
export MY_SERVICE_TOKEN="$SECRET-token" DB_PASSWORD="$SECRET-password"
export no_proxy=127.0.0.1,localhost NO_PROXY=127.0.0.1,localhost
echo "$FILE_SECRET" >secret.txt

# A listener on loopback that logs every connection it accepts, and the
# mock model of t0500 (the llm agent's prompts are logged).
cat >listen.py <<'EOF'
import socket, sys
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(8)
s.settimeout(300)
open(sys.argv[1] + ".new", "w").write(str(s.getsockname()[1]))
__import__("os").rename(sys.argv[1] + ".new", sys.argv[1])
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
	--port-file "$TRASH/mport" --log "$TRASH/requests.log" --idle 300 \
	</dev/null >/dev/null 2>&1 &
MOCK_PID=$!
trap 'kill $LISTEN_PID $MOCK_PID 2>/dev/null; cd /; rm -rf "$TRASH"' EXIT
for i in $(seq 1 200); do
	test -s "$TRASH/lport" && test -s "$TRASH/mport" && break
	sleep 0.1
done
LPORT=$(cat "$TRASH/lport") MPORT=$(cat "$TRASH/mport")

base="$TEST_DIR/kernels/softmax-f32.c"
small_problem softmax | sed -e 's/"f16", "bf16", "f32"/"f32"/' >small.json
# thirty times the work: the baseline an honest candidate beats
sed -e 's|/\* BREAK \*/|{ static int d; if (d < 30) { d++; ak_kernel(a); d--; } }|' \
	"$base" >slow.c
sed -e 's|/\* BREAK \*/||' "$base" >fast.c

# evil NAME: NAME.c, the prelude NAME.pre, then a softmax that calls
# evil() first
evil () {
	{ cat "$1.pre" && sed -e 's|/\* BREAK \*/|evil();|' "$base"; } >"$1.c"
}

cat >env.pre <<EOF
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

cat >outside.pre <<EOF
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

cat >net.pre <<EOF
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
static void evil(void)
{
	struct sockaddr_in a = { 0 };
	int s = socket(AF_INET, SOCK_STREAM, 0);

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

{ echo "#include \"$TRASH/secret.txt\"" && cat fast.c; } >include.c

# kernel_dir DIR KERNEL: a plain directory to verify
kernel_dir () {
	mkdir -p "$1/softmax" && cp small.json "$1/softmax/problem.json" &&
	cp "$2" "$1/softmax/kernel.c"
}

# nowhere WORD: WORD is in no output kept under $TRASH/out, no file of
# the repository's .git, no object of it (notes and attempts among
# them), and no prompt the model was sent
nowhere () {
	! grep -rF "$1" out repo/.git &&
	! (cd repo && git cat-file --batch-all-objects --batch) | grep -F "$1" &&
	! { test ! -e requests.log || python3 -c "import json, sys
for line in open(sys.argv[1]):
    print(json.dumps(json.loads(line)[\"body\"]))" requests.log; } |
		grep -F "$1"
}

# try NAME [CONFIG]: commits NAME.c on the branch (git -c CONFIG), the
# hook rejects it; its output in out/NAME, its attempt's note (the whole
# verdict) in out/NAME.note
try () {
	(cd repo && cp "../$1.c" softmax/kernel.c &&
	 test_must_fail git ${2:+-c "$2"} commit -q -m "try $1" \
		softmax/kernel.c >"../out/$1" 2>&1 &&
	 n=$(git for-each-ref refs/autokernel/attempts/softmax/ | wc -l) &&
	 git notes --ref=autokernel show refs/autokernel/attempts/softmax/$n \
		>"../out/$1.note")
}

mkdir out
test_setup 'a branch, a listener and a model on loopback' '
	test -n "$LPORT" && test -n "$MPORT" &&
	new_repo repo && cd repo &&
	git autokernel start softmax --backend host --from ../slow.c \
		--problem ../small.json >../out/start 2>&1 &&
	git config autokernel.llm.url "http://127.0.0.1:$MPORT/v1" &&
	git config autokernel.llm.model mock-model &&
	cd .. &&
	python3 -c "import socket; socket.create_connection((\"127.0.0.1\", $LPORT))" &&
	for i in $(seq 1 50); do test -s connections && break; sleep 0.1; done &&
	grep "connection from" connections && : >connections
'
landlock=yes
grep "no Landlock on this kernel" out/start >/dev/null && landlock=

test_expect_success 'an honest kernel builds, passes and is kept' '
	cd repo && cp ../fast.c softmax/kernel.c &&
	git commit -q -m "do the work once" softmax/kernel.c \
		>../out/honest 2>&1 &&
	grep "verdict: keep" ../out/honest &&
	git notes --ref=autokernel show HEAD | grep "\"status\": \"kept\""
'

test_expect_success 'a kernel that reads its environment finds no secret' '
	try env &&
	grep "looked through the environment" out/env.note &&
	nowhere "$SECRET" && ! grep -F "$SECRET" env-dump
'

test_expect_success 'the same kernel, unconfined, would have found them' '
	kernel_dir ctl-env env.c &&
	test_must_fail git -c autokernel.sandbox=false autokernel verify \
		ctl-env/softmax >ctl 2>&1 &&
	grep -F "OPENAI_API_KEY=$SECRET-openai" ctl &&
	grep "autokernel.sandbox is off: the candidate ran unconfined" ctl &&
	rm -f env-dump
'

if test -n "$landlock"; then
	test_expect_success 'a kernel writes nothing outside its cell' '
		try outside && grep "tried the files" out/outside.note &&
		! test -e written && ! test -e "$HOME/written" &&
		! test -e repo/written && ! grep "wrote /" out/outside.note &&
		nowhere "$SECRET"
	'
	test_expect_success 'and unconfined it would have' '
		kernel_dir ctl-outside outside.c &&
		test_must_fail git -c autokernel.sandbox=false autokernel \
			verify ctl-outside/softmax >ctl 2>&1 &&
		test -e written && rm -f written "$HOME/written" repo/written
	'
else
	test_skip 'a kernel writes nothing outside its cell' 'no Landlock here'
fi

test_expect_success 'a kernel'"'"'s connection to 127.0.0.1 never arrives' '
	try net && grep "no connection: Permission denied" out/net.note &&
	sleep 0.5 && ! grep "connection from" connections
'

test_expect_success 'unconfined, it would have' '
	kernel_dir ctl-net net.c &&
	test_must_fail git -c autokernel.sandbox=false autokernel verify \
		ctl-net/softmax >ctl 2>&1 &&
	for i in $(seq 1 50); do test -s connections && break; sleep 0.1; done &&
	grep "connection from" connections
'

# a compiler that fails with its environment's secrets as its errors
cat >envcc <<'EOF'
#!/bin/sh
test "$1" = --version && echo "envcc 1" && exit 0
env | grep -E "KEY|TOKEN|SECRET|PASSWORD" | sed -e "s/^/error: /"
echo "error: the compiler looked"
exit 1
EOF
chmod +x envcc

test_expect_success 'the compiler gets no secret either' '
	kernel_dir ccdir fast.c &&
	AUTOKERNEL_CC="$TRASH/envcc" test_expect_code 1 git autokernel verify \
		--build-only ccdir/softmax >out/envcc 2>&1 &&
	grep "error: the compiler looked" out/envcc && nowhere "$SECRET"
'

test_expect_success 'a kernel that includes a secret file shows none of it' '
	try include && grep "unable to build" out/include &&
	grep "softmax/kernel.c" out/include &&
	nowhere "$FILE_SECRET"
'

test_expect_success 'not even with the cell off' '
	{ cat include.c && echo "/* unconfined */"; } >include-off.c &&
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
	printf "[{\"reply_file\": \"%s\"}]\n" "$TRASH/broken.txt" >script.new &&
	mv script.new script.json &&
	(cd repo && AUTOKERNEL_API_KEY=mock-key git autokernel run --agent llm \
		--max-experiments 1 >../out/run 2>&1) &&
	grep "unable to build" requests.log &&
	nowhere "$SECRET" && nowhere "$FILE_SECRET"
'

test_done
