#!/bin/sh
# run_streams.sh - streams, events and host functions (stream_check) on 1 to 8
# ranks over the default transports and tcp, then a peer killed under a stream
# operation: its error must reach the stream and the operation's request.
# shellcheck source=tests/test_lib.sh
. "$(dirname "$0")/../test_lib.sh"
run="$top/tools/hcomm-run" check="$top/tests/coll/stream_check"
need "$run" "$check" "$top/tests/coll/fake_cuda_check"
export HCOMM_TIMEOUT=60
scratch streams
for n in 1 2 3 4 8; do
    try 300 "$run" -n "$n" "$check"
    result "stream_check on $n ranks" $?
done
try 300 HCOMM_TRANSPORT=tcp "$run" -n 3 "$check"
result "stream_check on 3 ranks over tcp" $?
for t in auto tcp; do
    try 120 HCOMM_TRANSPORT=$t HCOMM_TIMEOUT=10 "$run" -n 3 "$check" --kill-peer &&
        [ "$(grep -c 'dead peer failed with' "$out")" -eq 2 ]
    result "a peer killed under a stream allreduce ($t): error on stream and request" $?
done
try 120 HCOMM_TIMEOUT=10 "$run" -n 2 "$check" --abort && has 'allreduce under abort ended with'
result "a communicator aborted under a running stream op: the op fails" $?
try 120 HCOMM_TIMEOUT=2 "$run" -n 2 "$check" --event-timeout &&
    [ "$(grep -c 'behind a timed-out event wait ended with' "$out")" -eq 2 ]
result "an allreduce behind an event wait that timed out fails, not runs on unready data" $?
# CUDA-ordered streams on a fake CUDA stream (no GPU needed)
fake="$top/tests/coll/fake_cuda_check"
try 60 HCOMM_TIMEOUT=1 "$fake" bucket
result "buckets on a CUDA stream that stalls past HCOMM_TIMEOUT: the step fails at once" $?
try 60 HCOMM_TIMEOUT=1 "$fake" long
result "a host function past HCOMM_TIMEOUT on a CUDA stream: the stream's error says so" $?
# CUDA streams: built when configure found CUDA, run where a GPU is (without
# one cuda_stream_check says SKIP and why)
cuda="$top/tests/coll/cuda_stream_check"
if [ ! -x "$cuda" ]; then
    result "CUDA streams: this build has no CUDA (configure did not find it)" 77
else
    try 120 "$run" -n 2 "$cuda"
    rc=$?
    if has '^SKIP'; then result "CUDA streams: $(grep -m1 '^SKIP' "$out" | sed 's/^SKIP: *//')" 77
    else result "CUDA stream ordering on 2 ranks" $rc; fi
fi
finish
