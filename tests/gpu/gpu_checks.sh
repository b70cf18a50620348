#!/bin/sh
# gpu_checks.sh - issue 22's GPU checks in one run, on a GPU machine that got
# this tree with .devcarry/ (tests/gpu/pack.sh, run where it was built). Each
# step has a timeout; the whole log goes to $OUT/gpu_checks.log (or /tmp).
#   the device reductions and the collectives on CUDA memory (run_device.sh),
#   calls ordered on CUDA streams (cuda_stream_check), the NCCL drop-in on
#   CUDA streams (nccl_check_cuda), cudaMemcpy's rates and the staged
#   allreduce at 64 MiB to 1 GiB on 2 and 4 ranks, and nccl-tests where
#   .devcarry/nccl-tests/bin holds a build of it.
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top" || exit 1
out=${OUT:-/tmp/gpu_out}
mkdir -p "$out"
log="$out/gpu_checks.log"
: > "$log"
say() { echo "$*" | tee -a "$log"; }
# step SECONDS NAME CMD...: runs CMD with a timeout, its output into the log
# and its last lines here
step() {
    t=$1 name=$2
    shift 2
    say "==== $name"
    s0=$(date +%s)
    timeout -k 5 "$t" "$@" > "$out/step.txt" 2>&1
    rc=$?
    cat "$out/step.txt" >> "$log"
    tail -n "${TAIL:-6}" "$out/step.txt"
    say "==== $name: rc $rc in $(($(date +%s) - s0)) s"
}

tar xzf .devcarry/build.tgz
built=$(cat .devcarry/built_at)
if [ "$built" != "$top" ] && [ ! -e "$built" ]; then
    mkdir -p "$(dirname "$built")" && ln -s "$top" "$built"
fi
export LD_LIBRARY_PATH="$top/.libs:$top/.devcarry/libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export HCOMM_TIMEOUT=60
TAIL=3 step 20 "machine" sh -c 'nvidia-smi -L; nproc; grep PRETTY /etc/os-release;
    ldd tests/coll/.libs/device_check_cuda 2>/dev/null | grep "not found"; true'
TAIL=14 step 200 "run_device.sh" sh tests/coll/run_device.sh
step 60 "cuda_stream_check, 2 ranks" tools/hcomm-run -n 2 tests/coll/cuda_stream_check
for n in 1 2; do
    step 120 "nccl_check_cuda, $n ranks" env NCCL_CHECK_ID_FILE="$out/ncclid.$n" \
        tools/hcomm-run -n "$n" -t 100 tests/shim/nccl_check_cuda
done
step 60 "cudaMemcpy rates" tests/coll/device_check_cuda --copies 1073741824
for n in 2 4; do
    for count in 16777216 67108864 268435456; do
        iters=5
        [ "$count" -lt 268435456 ] || iters=3
        TAIL=2 step 90 "staged allreduce, $n ranks, $((count * 4)) bytes" \
            tools/hcomm-run -n "$n" tests/coll/device_check_cuda --bench "$count" "$iters"
    done
done
# shellcheck disable=SC2086 # NCCL_TESTS: the tests to run, several words
TAIL=60 step 200 "nccl-tests" env HCOMM_TIMEOUT=20 sh tests/gpu/nccl_tests.sh ${NCCL_TESTS:-}
say "log: $log"
