#!/bin/sh
# run --slurm on a real Slurm: a single-node cluster on localhost (munged,
# slurmctld and slurmd, as root, in the trash directory with a generated
# slurm.conf); host-backend judgements submitted through it land in git
# as they would have locally, and a cancelled job loses nothing.
. "$(dirname "$0")/lib.sh"

if ! command -v slurmctld >/dev/null 2>&1 || ! command -v slurmd >/dev/null 2>&1 ||
   ! command -v munged >/dev/null 2>&1 || ! command -v sbatch >/dev/null 2>&1; then
	echo "1..0 # SKIP Slurm is not installed (apt-get install slurm-wlm munge)"
	exit 0
fi
if test "$(id -u)" != 0; then
	echo "1..0 # SKIP a private slurmd runs jobs as root only: run as root"
	exit 0
fi

S="$TRASH/slurm"
HOST=$(hostname -s)
export SLURM_CONF="$S/slurm.conf"

stop_slurm () {
	scontrol shutdown >/dev/null 2>&1
	for f in "$S/slurmctld.pid" "$S/slurmd.pid" "$S/munge/pid"; do
		test -s "$f" && kill "$(cat "$f")" 2>/dev/null
	done
	sleep 1
}
trap 'stop_slurm; cd /; rm -rf "$TRASH"' EXIT

# Two free ports on localhost, for slurmctld and slurmd.
ports=$(python3 -c '
import socket
s = [socket.socket() for _ in range(2)]
for x in s: x.bind(("127.0.0.1", 0))
print(" ".join(str(x.getsockname()[1]) for x in s))')

start_slurm () {
	mkdir -p "$S/munge" "$S/state" "$S/spool" "$S/log" &&
	chmod 700 "$S/munge" &&
	dd if=/dev/urandom of="$S/munge/key" bs=1024 count=1 2>/dev/null &&
	chmod 400 "$S/munge/key" &&
	munged -f --key-file="$S/munge/key" --socket="$S/munge/sock" \
		--pid-file="$S/munge/pid" --log-file="$S/munge/log" \
		--seed-file="$S/munge/seed" &&
	set -- $ports &&
	cat >"$SLURM_CONF" <<-EOF &&
	ClusterName=autokernel-test
	SlurmctldHost=$HOST(127.0.0.1)
	SlurmUser=root
	SlurmdUser=root
	SlurmctldPort=$1
	SlurmdPort=$2
	AuthType=auth/munge
	CredType=cred/munge
	AuthInfo=socket=$S/munge/sock
	StateSaveLocation=$S/state
	SlurmdSpoolDir=$S/spool
	SlurmctldPidFile=$S/slurmctld.pid
	SlurmdPidFile=$S/slurmd.pid
	SlurmctldLogFile=$S/log/slurmctld.log
	SlurmdLogFile=$S/log/slurmd.log
	ProctrackType=proctrack/linuxproc
	TaskPlugin=task/none
	SelectType=select/cons_tres
	SelectTypeParameters=CR_Core
	MpiDefault=none
	SwitchType=switch/none
	JobAcctGatherType=jobacct_gather/none
	AccountingStorageType=accounting_storage/none
	JobCompType=jobcomp/none
	SchedulerType=sched/builtin
	ReturnToService=2
	InactiveLimit=0
	MinJobAge=300
	NodeName=$HOST NodeAddr=127.0.0.1 CPUs=$(nproc) State=UNKNOWN
	PartitionName=ak Nodes=$HOST Default=YES MaxTime=INFINITE State=UP
	EOF
	slurmctld -f "$SLURM_CONF" -i &&
	slurmd -f "$SLURM_CONF" -N "$HOST" &&
	i=0 && while ! sinfo -h -o %T 2>/dev/null | grep -q "idle"; do
		i=$((i + 1)); test $i -lt 300 || return 1; sleep 0.1
	done
}

if ! start_slurm >"$TRASH/slurm-start.log" 2>&1; then
	echo "not ok 1 - a single-node Slurm on localhost"
	cat "$TRASH/slurm-start.log" "$S"/log/*.log "$S/munge/log" 2>/dev/null |
		tail -n 40 | sed -e 's/^/#   /' >&2
	echo "1..1"
	exit 1
fi
echo "ok 1 - a single-node Slurm on localhost"
test_count=1

small_problem softmax | sed -e 's/"f16", "bf16", "f32"/"f32"/' >small.json

test_setup 'a host softmax branch' '
	new_repo repo && cd repo &&
	git autokernel start softmax --backend host --problem ../small.json \
		>/dev/null 2>&1 && cd ..
'

test_expect_success 'judgements submitted as Slurm jobs land in git' '
	cd repo && git autokernel run --slurm --partition ak --workers 2 \
		--max-experiments 4 >../out 2>../err &&
	grep "judged by Slurm jobs" ../err &&
	grep "2 workers made 4 experiments" ../err &&
	git autokernel log --attempts --json >../log.json &&
	python3 - <<-\EOF
	import json, subprocess
	rows = json.load(open("../log.json"))
	assert len(rows) == 5, rows
	for r in rows[1:]:
	    note = json.loads(subprocess.run(
	        ["git", "notes", "--ref=autokernel", "show", r["commit"]],
	        capture_output=True, text=True, check=True).stdout)
	    assert note["judged_by"].startswith("Slurm job "), note
	    assert note["status"] in ("kept", "rejected"), note
	    parent = subprocess.run(["git", "rev-parse", r["commit"] + "^"],
	        capture_output=True, text=True).stdout.strip()
	    assert note["head"] == parent, (note["head"], parent)
	EOF
'

test_expect_success 'the jobs are done and nothing is left behind' '
	cd repo && test -z "$(squeue -h)" &&
	test $(git worktree list | wc -l) = 1 &&
	test -z "$(git for-each-ref refs/autokernel/jobs)" &&
	test -z "$(git status --porcelain)"
'

sed -e 's|/\* BREAK \*/|{ static int d; if (d < REPEAT) { d++; ak_kernel(a); d--; } }|' \
	"$TEST_DIR/kernels/softmax-f32.c" | sed -e "1i #define REPEAT 64" >slow.c
cat >edit.sh <<'EOF'
#!/bin/sh
echo "/* $$ $(date +%s%N) */" >>"$AUTOKERNEL_KERNEL"
echo "a comment" >"$AUTOKERNEL_MESSAGE"
EOF
chmod +x edit.sh

test_expect_success 'a cancelled job is an attempt, and the run goes on' '
	cd repo && git checkout -q main &&
	git autokernel start softmax --name slow --backend host --from ../slow.c \
		--problem ../small.json >/dev/null 2>&1 &&
	{ git autokernel run --slurm --workers 2 --max-experiments 4 \
		--agent exec -- ../edit.sh >../out 2>../err & } &&
	i=0 && while ! squeue -h -t RUNNING -o %i | grep -q .; do
		i=$((i + 1)); test $i -lt 600 || exit 1; sleep 0.1
	done &&
	scancel $(squeue -h -t RUNNING -o %i | head -1) &&
	wait &&
	cat ../err &&
	grep "rejected (job)" ../err &&
	git autokernel log --attempts --json >../log.json &&
	python3 - <<-\EOF
	import json, subprocess
	rows = json.load(open("../log.json"))
	assert len(rows) == 5, rows
	jobs = [r for r in rows if r.get("reason") == "job"]
	assert len(jobs) == 1, rows
	note = subprocess.run(["git", "notes", "--ref=autokernel", "show",
	    jobs[0]["commit"]], capture_output=True, text=True).stdout
	assert "CANCELLED" in note, note
	EOF
	test -z "$(squeue -h)" && test $(git worktree list | wc -l) = 1
'

mkdir -p nosbatch && printf '#!/bin/sh\nexit 1\n' >nosbatch/sbatch && chmod +x nosbatch/sbatch

test_expect_success '--slurm without a working sbatch says so' '
	cd repo && PATH="$TRASH/nosbatch:$PATH" &&
	test_expect_code 3 git autokernel run --slurm 2>../err &&
	grep "needs Slurm" ../err
'

test_done
