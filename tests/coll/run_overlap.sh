#!/bin/sh
# run_overlap.sh - gradient buckets against the plain allreduce of each tensor
# on 1 to 4 ranks (bucket_check: random sizes from empty to above a bucket,
# each rank marking its tensors ready in an order of its own, 3 steps, plain
# and compressed buckets, the layout, bad usage), with the default bucket size
# (a 1 MiB bucket, then one) and with 4K and 64K buckets (many of them); then
# a rank that dies in the middle of a step: the others' wait must fail; then
# short runs of examples/overlap_train, which checks its averages itself.
top=${top_builddir:-.}
run="$top/tools/hcomm-run" check="$top/tests/coll/bucket_check" train="$top/examples/overlap_train"
# shellcheck source=tests/coll/test_lib.sh
. "$(dirname "$0")/test_lib.sh"
need "$run" "$check" "$train"
export HCOMM_TIMEOUT=60
scratch overlap
for n in 1 2 3 4; do
    for bytes in default 4K 64K; do
        if [ "$bytes" = default ]; then
            timeout 300 "$run" -n "$n" "$check" > "$out" 2>&1
        else
            HCOMM_BUCKET_BYTES=$bytes timeout 300 "$run" -n "$n" "$check" > "$out" 2>&1
        fi
        result "bucket_check on $n ranks, buckets of $bytes bytes" $?
    done
done
HCOMM_TRANSPORT=tcp HCOMM_BUCKET_BYTES=16K timeout 300 "$run" -n 3 "$check" > "$out" 2>&1
result "bucket_check on 3 ranks over tcp, buckets of 16K bytes" $?
for n in 2 3; do
    HCOMM_TIMEOUT=20 timeout 120 "$run" -n "$n" "$check" --kill > "$out" 2>&1 &&
        [ "$(grep -c '^PASS' "$out")" -eq $((n - 1)) ]
    result "bucket_check --kill on $n ranks: the survivors' wait fails" $?
done
# the example: short runs, each rank checks every averaged gradient itself
small="--layers 6 --layer-bytes 256K --compute-us 300 --steps 2 --warmup 0 --bucket-bytes 512K"
# shellcheck disable=SC2086
timeout 120 "$run" -n 2 "$train" $small > "$out" 2>&1 &&
    grep -q 'checked against its expected average' "$out"
result "overlap_train on 2 ranks, overlap and serial, averages checked" $?
# shellcheck disable=SC2086
timeout 120 "$run" -n 3 "$train" $small --mode overlap --compress fp16 > "$out" 2>&1 &&
    grep -q 'checked against its expected average' "$out"
result "overlap_train on 3 ranks, fp16 buckets, averages checked" $?
# shellcheck disable=SC2086
timeout 120 "$run" -n 2 "$train" $small --mode serial --compress onebit > "$out" 2>&1 &&
    grep -q 'every gradient identical on every rank' "$out"
result "overlap_train on 2 ranks, onebit buckets, the same bits on every rank" $?
finish
