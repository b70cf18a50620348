#!/bin/sh
# run_trace.sh - HCOMM_TRACE_FILE and the profiler hooks: trace_check under
# hcomm-run on 2 and 3 ranks with a trace file per rank, then checks each file
# parses as JSON and holds every operation the rank ran (numbers 1 to the last
# trace_check printed, one complete event each, the group and the stream's
# operation among them); again when the ranks exit without destroying the
# communicator (the exit flush), and when one rank vanishes as if killed (no
# exit handler runs): the survivors' traces end with the failed operation, the
# victim's is still whole JSON (of no operation: nothing reached its file).
# Then hcomm-perf --trace, over enough operations for the records to go
# through the spill files.
# shellcheck source=tests/test_lib.sh
. "$(dirname "$0")/../test_lib.sh"
run="$top/tools/hcomm-run" check="$top/tests/coll/trace_check" perf="$top/perf/hcomm-perf"
need "$run" "$check" "$perf"
command -v python3 > /dev/null || skip "python3 is needed to parse the traces"
export HCOMM_TIMEOUT=30
scratch trace

# verify FILE LAST [STATUS]: FILE is JSON with operations 1..LAST, each once;
# the last one's status is STATUS (default HCOMM_SUCCESS for all)
verify() {
    python3 - "$@" << 'EOF'
import json, sys
path, last = sys.argv[1], int(sys.argv[2])
final = sys.argv[3] if len(sys.argv) > 3 else "HCOMM_SUCCESS"
ev = json.load(open(path))["traceEvents"]
ops = [e for e in ev if e.get("ph") == "X"]
seqs = sorted(e["args"]["seq"] for e in ops)
assert seqs == list(range(1, last + 1)), "seq %s.. of %d, want 1..%d" % (seqs[:3], len(seqs), last)
for e in ops:
    assert e["dur"] >= 0 and e["ts"] > 0 and e["pid"] >= 0 and e["args"]["algorithm"], e
    want = final if e["args"]["seq"] == last else "HCOMM_SUCCESS"
    assert e["args"]["status"] == want, e
names = {e["name"] for e in ops}
if last > 20:
    assert {"allreduce", "broadcast", "group", "allgather", "barrier"} <= names, names
    assert any(e["name"] == "group" and e["args"]["calls"] == 2 for e in ops)
assert any(e["ph"] == "M" and e["name"] == "thread_name" for e in ev)
for b in [e for e in ev if e.get("ph") == "b"]:  # every queued slice ends
    assert any(x.get("ph") == "e" and x["id"] == b["id"] for x in ev), b
print("%s: %d operations, %d events" % (path, len(ops), len(ev)))
EOF
}

# last RANK: the last operation trace_check rank RANK printed
last() {
    sed -n "s/^trace_check rank $1: last seq \([0-9]*\);.*/\1/p" "$out"
}

for n in 2 3; do
    rm -f "$tmp"/t.*.json
    try 120 HCOMM_TRACE_FILE="$tmp/t.json" "$run" -n "$n" "$check"
    rc=$?
    r=0
    while [ $rc -eq 0 ] && [ $r -lt "$n" ]; do
        verify "$tmp/t.$r.json" "$(last $r)" >> "$out" 2>&1 || rc=1
        r=$((r + 1))
    done
    result "trace and profiler hooks on $n ranks: every operation in each rank's file" $rc
done

rm -f "$tmp"/t.*.json
try 120 HCOMM_TRACE_FILE="$tmp/t.%r.json" "$run" -n 2 "$check" --no-destroy &&
    verify "$tmp/t.0.json" "$(last 0)" >> "$out" 2>&1 &&
    verify "$tmp/t.1.json" "$(last 1)" >> "$out" 2>&1
result "no destroy: the exit flush writes every operation" $?

rm -f "$tmp"/t.*.json
try 120 HCOMM_TRACE_FILE="$tmp/t.json" "$run" -n 3 "$check" --kill
[ -n "$(last 0)" ] && [ -n "$(last 1)" ] &&
    verify "$tmp/t.0.json" "$(last 0)" HCOMM_ERR_REMOTE >> "$out" 2>&1 &&
    verify "$tmp/t.1.json" "$(last 1)" HCOMM_ERR_REMOTE >> "$out" 2>&1 &&
    verify "$tmp/t.2.json" 0 >> "$out" 2>&1
result "a rank gone: survivors' traces end with the failed operation, the victim's parses" $?

rm -f "$tmp"/p.*.json
try 120 "$perf" all_reduce -b 8 -e 1K -n 300 -w 1 --trace "$tmp/p.json" && perf_ok &&
    python3 -c "
import json, sys
for r in (0, 1):
    ops = [e for e in json.load(open('$tmp/p.%d.json' % r))['traceEvents'] if e['ph'] == 'X']
    seqs = sorted(e['args']['seq'] for e in ops)
    assert seqs == list(range(1, len(ops) + 1)) and len(ops) > 4096, len(ops)
" >> "$out" 2>&1
result "hcomm-perf --trace: every one of its operations in each rank's trace" $?

# a full disk: a 256 KiB tmpfs in a mount namespace of the test's own; the
# trace stops at the failed write and its file still parses
if [ "$(id -u)" != 0 ] || ! unshare -m true 2> /dev/null; then
    result "a full disk under the trace: needs root and unshare -m" 77
else
    mkdir -p "$tmp/full"
    try 120 unshare -m sh -c "mount -t tmpfs -o size=256k tmpfs '$tmp/full' &&
        '$perf' all_reduce -b 8 -e 8 -n 20000 -w 1 --trace '$tmp/full/f.json';
        python3 -c \"
import json
for r in (0, 1):
    ops = [e for e in json.load(open('$tmp/full/f.%d.json' % r))['traceEvents'] if e['ph'] == 'X']
    assert len(ops) < 20000, len(ops)
    print('full disk: rank %d kept %d operations' % (r, len(ops)))
\"" && has 'write failed' && has 'full disk: rank 1 kept'
    result "a full disk under the trace: tracing stops, the file still parses" $?
fi
finish
