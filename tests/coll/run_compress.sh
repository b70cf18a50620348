#!/bin/sh
# run_compress.sh - the compressed allreduce against its serial model on 1 to 8
# ranks (compress_check: every codec, counts 1 to 100003, in and out of place,
# several steps so the residuals count), over the default transports and tcp,
# then hcomm-perf -C's own checks.
# shellcheck source=tests/test_lib.sh
. "$(dirname "$0")/../test_lib.sh"
run="$top/tools/hcomm-run" check="$top/tests/coll/compress_check" perf="$top/perf/hcomm-perf"
need "$run" "$check" "$perf"
export HCOMM_TIMEOUT=60
scratch compress
for n in 1 2 3 4 5 6 7 8; do
    try 300 "$run" -n "$n" "$check"
    result "compress_check on $n ranks" $?
done
try 300 HCOMM_TRANSPORT=tcp "$run" -n 3 "$check"
result "compress_check on 3 ranks over tcp" $?
for c in onebit topk:0.01 fp16 bf16; do
    try 120 "$perf" all_reduce --ranks 3 -C "$c" -b 8 -e 4M -f 16 -n 2 -w 1 && perf_ok
    result "hcomm-perf all_reduce -C $c on 3 ranks" $?
done
try 60 "$perf" all_reduce --ranks 2 -C topk:2
[ $? -eq 2 ]
result "hcomm-perf -C topk:2 is refused" $?
finish
