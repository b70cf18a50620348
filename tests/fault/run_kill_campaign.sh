#!/bin/sh
# run_kill_campaign.sh - the kill campaign (kill_campaign.c): random trials,
# each a rank killed (SIGKILL) or stopped (SIGSTOP) at a random moment of a
# random collective (allreduce, alltoall, broadcast, compressed allreduce, MoE
# dispatch and combine, an allreduce on a stream) over shm, tcp or both
# (virtual nodes), 2 to 8 ranks; every survivor must fail within its bound,
# nothing may hang, and /dev/shm must hold nothing of the job afterwards.
# make check runs KC_TRIALS (30) trials with a fresh seed, printed with every
# line, so a failure can be rerun (kill_campaign --seed S --trial K); set
# KC_SEED to repeat a run. Exit 0 pass, 1 fail, 77 not built.
# shellcheck source=tests/test_lib.sh
. "$(dirname "$0")/../test_lib.sh"
bin=${KILL_CAMPAIGN:-$top/tests/fault/kill_campaign}
need "$bin"
[ -d /dev/shm ] || skip "no /dev/shm"
scratch kill-campaign
unset HCOMM_RANK HCOMM_NRANKS HCOMM_ROOT HCOMM_COOKIE HCOMM_TRANSPORT HCOMM_TOPO_FILE
trials=${KC_TRIALS:-30}
seed=${KC_SEED:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}
# the program bounds every trial itself; this is the last resort (10 s a
# trial): TERM first, on which it kills its ranks, KILL 10 s later
TMPDIR=$tmp HCOMM_TIMEOUT=3 timeout -k 10 $((60 + 10 * trials)) \
    "$bin" --seed "$seed" --trials "$trials" | tee "$out"
rc=$?
# tee hides the program's status: the summary line says it
has "^kill_campaign: $trials trials, .* 0 failed;" || rc=1
result "kill_campaign --seed $seed --trials $trials: $(sed -n 's/^kill_campaign: [0-9]* trials, seed [0-9]*, //p' "$out")" $rc
finish
