#!/bin/sh
# run_overlap.sh - gradient buckets against the plain allreduce of each tensor
# on 1 to 4 ranks (bucket_check: random sizes from empty to above a bucket,
# each rank marking its tensors ready in an order of its own, 3 steps, plain
# and compressed buckets, the layout, bad usage), with the default bucket size
# (a 1 MiB bucket, then one) and with 4K and 64K buckets (many of them); then
# a rank that dies in the middle of a step: the others' wait must fail; a
# stream that failed before the buckets came: they still work; then short runs of examples/overlap_train, which checks its averages itself.
# shellcheck source=tests/test_lib.sh
. "$(dirname "$0")/../test_lib.sh"
run="$top/tools/hcomm-run" check="$top/tests/coll/bucket_check" train="$top/examples/overlap_train"
need "$run" "$check" "$train"
export HCOMM_TIMEOUT=60
scratch overlap
for n in 1 2 3 4; do
    for bytes in default 4K 64K; do
        if [ "$bytes" = default ]; then
            try 300 "$run" -n "$n" "$check"
        else
            try 300 HCOMM_BUCKET_BYTES=$bytes "$run" -n "$n" "$check"
        fi
        result "bucket_check on $n ranks, buckets of $bytes bytes" $?
    done
done
try 300 HCOMM_TRANSPORT=tcp HCOMM_BUCKET_BYTES=16K "$run" -n 3 "$check"
result "bucket_check on 3 ranks over tcp, buckets of 16K bytes" $?
for n in 2 3; do
    try 120 HCOMM_TIMEOUT=20 "$run" -n "$n" "$check" --kill &&
        [ "$(grep -c '^PASS' "$out")" -eq $((n - 1)) ]
    result "bucket_check --kill on $n ranks: the survivors' wait fails" $?
done
try 120 HCOMM_TIMEOUT=1 "$run" -n 2 "$check" --older-failure &&
    [ "$(grep -c '^PASS' "$out")" -eq 2 ]
result "bucket_check --older-failure on 2 ranks: a stream's earlier failure is not the buckets'" $?
# the example: short runs, each rank checks every averaged gradient itself
small="--layers 6 --layer-bytes 256K --compute-us 300 --steps 2 --warmup 0 --bucket-bytes 512K"
# shellcheck disable=SC2086 # small is a list of arguments
try 120 "$run" -n 2 "$train" $small && has 'checked against its expected average'
result "overlap_train on 2 ranks, overlap and serial, averages checked" $?
# shellcheck disable=SC2086
try 120 "$run" -n 3 "$train" $small --mode overlap --compress fp16 &&
    has 'checked against its expected average'
result "overlap_train on 3 ranks, fp16 buckets, averages checked" $?
# shellcheck disable=SC2086
try 120 "$run" -n 2 "$train" $small --mode serial --compress onebit &&
    has 'every gradient identical on every rank'
result "overlap_train on 2 ranks, onebit buckets, the same bits on every rank" $?
finish
