#!/bin/sh
# run_streams.sh - streams, events and host functions (stream_check) on 1 to 8
# ranks over the default transports and tcp, then a peer killed under a stream
# operation: its error must reach the stream and the operation's request.
top=${top_builddir:-.}
run="$top/tools/hcomm-run" check="$top/tests/coll/stream_check"
# shellcheck source=tests/coll/test_lib.sh
. "$(dirname "$0")/test_lib.sh"
need "$run" "$check"
export HCOMM_TIMEOUT=60
scratch streams
for n in 1 2 3 4 8; do
    timeout 300 "$run" -n "$n" "$check" > "$out" 2>&1
    result "stream_check on $n ranks" $?
done
HCOMM_TRANSPORT=tcp timeout 300 "$run" -n 3 "$check" > "$out" 2>&1
result "stream_check on 3 ranks over tcp" $?
for t in auto tcp; do
    HCOMM_TRANSPORT=$t HCOMM_TIMEOUT=10 timeout 120 "$run" -n 3 "$check" --kill-peer > "$out" 2>&1 &&
        [ "$(grep -c 'dead peer failed with' "$out")" -eq 2 ]
    result "a peer killed under a stream allreduce ($t): error on stream and request" $?
done
# CUDA streams: built when configure found CUDA, run where a GPU is
cuda="$top/tests/coll/cuda_stream_check"
if [ -x "$cuda" ]; then
    timeout 120 "$run" -n 2 "$cuda" > "$out" 2>&1
    rc=$?
    if grep -q '^SKIP' "$out"; then echo "SKIP CUDA streams: $(grep -m1 '^SKIP' "$out")"
    else result "CUDA stream ordering on 2 ranks" $rc; fi
else
    echo "SKIP CUDA streams: this build has no CUDA (configure did not find it)"
fi
finish
