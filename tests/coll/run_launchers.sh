#!/bin/sh
# run_launchers.sh - hcomm_comm_init_env under each launcher (docs/launchers.md),
# 3 ranks of examples/init_env (one allreduce, checked): first with the
# variables set by hand as torchrun and srun set them (a loopback root; a root
# on IPv6 loopback; a remote one with HCOMM_COOKIE; a remote one without,
# refused with the hardening rules' line; HCOMM_ROOT over the derived root) and
# PMIx's rank with PMI-1's size, which is no launcher; a rank that joins twice
# (all refused at once, a late one too); a rank with a /dev/shm of its own
# (tcp, not shm); then for real, with nothing set by hand: Open MPI's mpirun
# (PMIx), MPICH's mpirun.mpich (PMI-1) and torchrun, each where installed, and
# hcomm-perf under both mpiruns; and hcomm-run's end of a job whose rank
# failed.
# shellcheck source=tests/test_lib.sh
. "$(dirname "$0")/../test_lib.sh"
ex="$top/examples/init_env" perf="$top/perf/hcomm-perf"
need "$ex" "$perf"
scratch launchers
# nothing of the caller's launcher may leak in (make check under srun)
unset HCOMM_RANK HCOMM_NRANKS HCOMM_ROOT HCOMM_ROOT_FD HCOMM_COOKIE HCOMM_COOKIE_FROM_ROOT \
    PMIX_RANK PMIX_NAMESPACE PMI_RANK PMI_SIZE PMI_FD SLURM_PROCID SLURM_NTASKS SLURM_LOCALID \
    SLURM_STEP_ID SLURM_JOB_ID SLURM_JOBID SLURM_STEP_NODELIST SLURM_JOB_NODELIST RANK \
    WORLD_SIZE LOCAL_RANK MASTER_ADDR MASTER_PORT TORCHELASTIC_RUN_ID OMPI_COMM_WORLD_RANK OMPI_COMM_WORLD_SIZE
export HCOMM_TIMEOUT=30 HCOMM_LOG_LEVEL=info
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# below the kernel's ephemeral ports (32768 up by default): there any
# connection's local end may hold the port (seen: 40010, EADDRINUSE)
port=$((20000 + $$ % 10000))
# each case its own ports: a listener of the case before may still hold its
# port (a rank not yet gone), and a bind there fails with EADDRINUSE
case_result() {
    result "$@"
    port=$((port + 2))
}
cookie=$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')

# ranks N CMD...: ranks 0..N-1 of CMD at once, rank R with the variables
# `rank_env R` prints (one assignment a word), each under a timeout; all
# output into $out; 0 when every rank exited 0.
ranks() {
    n=$1
    shift
    pids=
    set -f # node[07-09] is no pattern
    for r in $(seq 0 $((n - 1))); do
        # shellcheck disable=SC2046 # one assignment a word
        timeout 90 env $(rank_env "$r") "$@" > "$tmp/rank$r" 2>&1 &
        pids="$pids $!"
    done
    set +f
    rc=0
    for p in $pids; do
        wait "$p" || rc=1
    done
    cat "$tmp"/rank* > "$out"
    rm -f "$tmp"/rank*
    return $rc
}
# ok N LAUNCHER: N ranks summed right, and said which launcher they found.
ok() {
    [ "$(grep -c 'allreduce ok' "$out")" -eq "$1" ] && [ "$(grep -c "launcher $2:" "$out")" -eq "$1" ]
}
# refused N PATTERN: N ranks failed, each with a line matching PATTERN.
refused() {
    [ "$(grep -c 'init_env: hcomm_comm_init_env: invalid usage' "$out")" -eq "$1" ] &&
        [ "$(grep -c -e "$2" "$out")" -eq "$1" ]
}

# ---- torchrun's variables by hand ----
torch_env() { echo "RANK=$1 WORLD_SIZE=3 LOCAL_RANK=$1 MASTER_ADDR=$addr MASTER_PORT=$port"; }
rank_env() { torch_env "$1"; }
addr=127.0.0.1
ranks 3 "$ex" && ok 3 torchrun && has "root 127.0.0.1:$((port + 1))"
case_result "torchrun's variables, loopback MASTER_ADDR: root on MASTER_PORT+1, no cookie" $?
ip=$(hostname -I 2> /dev/null | tr ' ' '\n' | grep -v -e : -e '^127\.' -e '^$' | head -n 1)
if [ -n "$ip" ]; then
    addr=$ip
    rank_env() { echo "$(torch_env "$1") HCOMM_COOKIE=$cookie"; }
    ranks 3 "$ex" && ok 3 torchrun
    case_result "torchrun's variables, MASTER_ADDR=$ip, HCOMM_COOKIE set" $?
else
    case_result "torchrun's variables, remote root with HCOMM_COOKIE: no non-loopback IPv4 here" 77
fi
addr=192.0.2.1 # TEST-NET-1: nothing is sent there
rank_env() { torch_env "$1"; }
ranks 3 "$ex"
refused 3 "HCOMM_COOKIE is not set and the root 192.0.2.1:$((port + 1)) (torchrun: "
case_result "torchrun's variables, remote root without HCOMM_COOKIE: refused" $?

# ---- an IPv6 root: every listener a rank opens takes its address ----
if ip -6 addr show dev lo 2> /dev/null | grep -q '::1/128'; then
    rank_env() { echo "HCOMM_RANK=$1 HCOMM_NRANKS=3 HCOMM_ROOT=[::1]:$port"; }
    ranks 3 "$ex" && ok 3 hcomm-run
    case_result "HCOMM_ROOT=[::1]:$port: 3 ranks over IPv6 loopback" $?
else
    case_result "an IPv6 root: no ::1 on lo" 77
fi

# ---- srun's variables by hand (no PMI plugin) ----
slurm_env() {
    echo "SLURM_PROCID=$1 SLURM_NTASKS=3 SLURM_LOCALID=$1 SLURM_STEP_ID=0 SLURM_JOB_ID=$$" \
        "SLURM_STEP_NODELIST=$nodes SLURM_JOB_NODELIST=$nodes"
}
rank_env() { slurm_env "$1"; }
nodes='localhost,node[2-3]'
ranks 3 "$ex" && ok 3 Slurm && has 'root localhost:[0-9]'
case_result "srun's variables, nodes $nodes: root on the first, no cookie" $?
nodes='node[07-09,12]'
ranks 3 "$ex"
refused 3 'HCOMM_COOKIE is not set and the root node07:[0-9]* (Slurm: the first host'
case_result "srun's variables, nodes $nodes without HCOMM_COOKIE: refused" $?
rank_env() { echo "$(slurm_env "$1") HCOMM_ROOT=127.0.0.1:$port"; }
ranks 3 "$ex" && ok 3 Slurm
case_result "srun's variables with HCOMM_ROOT: it overrides the derived root" $?

# ---- torchrun inside srun: the outer launcher's variables are there too ----
nodes='localhost,node[2-3]'
rank_env() { echo "$(slurm_env 0) $(torch_env "$1") TORCHELASTIC_RUN_ID=$$"; }
addr=127.0.0.1
ranks 3 "$ex" && ok 3 torchrun
case_result "torchrun's agent under srun (SLURM_PROCID 0 on every worker): torchrun's ranks" $?

# ---- the mispairing of old: PMIx's rank, PMI-1's size ----
rank_env() { echo "PMIX_RANK=$1 PMI_SIZE=3"; }
ranks 3 "$ex"
refused 3 'no launcher found: .*set without the rest of their launcher.s: PMIX_RANK, PMI_SIZE'
case_result "PMIX_RANK with PMI_SIZE: no launcher, the line names both" $?

# ---- a rank that joins twice: every rank refused at once, not at the timeout;
# rank 2 starts only once the root refused everyone (rank 0's process, whose
# own init has failed by then): the root outlives its rank's failure until it
# has answered every rank ----
i=0
for r in 0 1 1 2; do
    i=$((i + 1))
    if [ $i -eq 4 ]; then
        n=0
        until grep -q 'refusing every rank' "$tmp/rank1" || [ $n -ge 200 ]; do
            sleep 0.1
            n=$((n + 1))
        done
        sleep 1 # rank 0's init returned its refusal long ago, were it not waiting
    fi
    HCOMM_RANK=$r HCOMM_NRANKS=3 HCOMM_ROOT=127.0.0.1:$port HCOMM_TIMEOUT=120 timeout 30 "$ex" \
        > "$tmp/rank$i" 2>&1 &
done
wait
cat "$tmp"/rank* > "$out"
rm -f "$tmp"/rank*
[ "$(grep -c 'init_env: hcomm_comm_init_env: invalid root, peer or rank' "$out")" -eq 4 ] &&
    has 'a rank was refused (invalid root, peer or rank): refusing every rank'
case_result "rank 1 twice, rank 2 after the refusals: all 4 refused within 30 s (HCOMM_TIMEOUT=120)" $?

# ---- a rank with a /dev/shm of its own (a container on the host's network):
# not one host to shared memory, so tcp, not a shm connect that times out ----
if [ "$(id -u)" = 0 ] && command -v unshare > /dev/null &&
    unshare -m sh -c 'mount -t tmpfs tmpfs /dev/shm' 2> /dev/null; then
    rank_env() { echo "HCOMM_RANK=$1 HCOMM_NRANKS=2 HCOMM_ROOT=127.0.0.1:$port HCOMM_TIMEOUT=15"; }
    # shellcheck disable=SC2046 # one assignment a word
    timeout 90 env $(rank_env 0) "$ex" > "$tmp/rank0" 2>&1 &
    p0=$!
    # shellcheck disable=SC2046,SC2016 # one assignment a word; $0 for the inner sh
    timeout 90 env $(rank_env 1) unshare -m sh -c \
        'mount -t tmpfs tmpfs /dev/shm && exec "$0"' "$ex" > "$tmp/rank1" 2>&1
    rc=$?
    wait $p0 || rc=1
    cat "$tmp"/rank* > "$out"
    rm -f "$tmp"/rank*
    [ $rc = 0 ] && [ "$(grep -c 'allreduce ok' "$out")" -eq 2 ]
    case_result "rank 1 with a /dev/shm of its own: the pair talks tcp" $?
else
    case_result "a rank with a /dev/shm of its own: needs root and unshare -m" 77
fi

# ---- real launchers, nothing set by hand ----
if [ -z "${HC_TEST_MPIRUN:-}" ] || ! mpirun=$(command -v "$HC_TEST_MPIRUN"); then
    case_result "Open MPI's mpirun: HC_TEST_MPIRUN unset or not found (make check sets it)" 77
else
    try 120 "$mpirun" --oversubscribe -np 3 "$ex" && ok 3 PMIx
    case_result "mpirun -np 3 init_env: the id through PMIx" $?
    try 120 "$mpirun" --oversubscribe -np 2 "$perf" all_reduce -b 8 -e 64K -f 8 -n 2 -w 1 &&
        perf_ok
    case_result "mpirun -np 2 hcomm-perf" $?
fi
if mpich=$(command -v mpirun.mpich); then
    try 120 "$mpich" -np 3 "$ex" && ok 3 PMI-1
    case_result "mpirun.mpich -np 3 init_env: the id through PMI-1" $?
    try 120 "$mpich" -np 2 "$perf" all_reduce -b 8 -e 64K -f 8 -n 2 -w 1 && perf_ok &&
        has 'launcher PMI-1:'
    case_result "mpirun.mpich -np 2 hcomm-perf" $?
else
    case_result "MPICH's mpirun: mpirun.mpich not installed (apt-get install mpich)" 77
fi
# Debian's torchrun (torch 1.13) fails on Python 3.11 before it starts a
# worker (its Std.from_str finds no member for "0"): patched here, only that
trun=$(command -v torchrun) && py=$(sed -n '1s/^#!//p' "$trun") &&
    "$py" -c 'import torch.distributed.run' 2> /dev/null
if [ $? -ne 0 ]; then
    case_result "torchrun: not installed (python3-torch)" 77
else
    try 120 "$py" -c '
import sys
from torch.distributed.elastic.multiprocessing import api
if api.Std.from_str("0") is None:
    orig = api.Std.from_str.__func__
    api.Std.from_str = classmethod(lambda c, v: c(int(v)) if v.isdigit() else orig(c, v))
from torch.distributed.run import main
sys.argv[0] = "torchrun"
main()' --nproc_per_node=3 --master_port="$port" --no_python "$ex" && ok 3 torchrun
    case_result "torchrun --nproc_per_node=3 init_env" $?
fi

# ---- hcomm-run: a rank that fails ends the job, with what the others started
# (a wrapper script's children too: each rank leads a process group)
run=$top/tools/hcomm-run dur=$((600000 + $$ % 100000))
at_exit "pkill -f 'sleep $dur' 2> /dev/null"
timeout 60 "$run" -n 3 sh -c 'if [ "$HCOMM_RANK" = 1 ]; then sleep 0.5; exit 3; fi
sleep '"$dur"'; true' > "$out" 2>&1
rc=$? left=1
for i in 1 2 3 4 5 6 7 8 9 10; do
    pgrep -f "sleep $dur" > /dev/null || { left=0; break; }
    sleep 0.2
done
echo "hcomm-run returned $rc; rank children left behind: $left" >> "$out"
[ $rc = 3 ] && [ $left = 0 ]
case_result "hcomm-run: a failed rank's job leaves no rank's children behind" $?
finish
