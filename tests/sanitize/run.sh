#!/bin/sh
# run.sh MODE [TEST...] - the tests under the compiler's sanitizers: copies this
# tree's sources (tracked and untracked, not ignored) to a scratch directory,
# builds them there with configure --enable-sanitizers and runs make check's
# TESTS. MODE asan: address,undefined over the unit tests and a multi-process
# subset; tsan: thread over the tests whose threads meet (streams, overlap,
# abort, the NCCL shim's communicators made together). Any sanitizer report
# fails the run.
#   tests/sanitize/run.sh asan          # or tsan; or name the tests
set -u
mode=${1:?usage: $0 asan|tsan [TEST...]}
shift
cd "$(dirname "$0")/../.." || exit 2
unit=$(awk '/^UNIT_TESTS = / { on = 1; next } on { if ($1 ~ /^tests\//) print $1; if ($0 !~ /\\$/) on = 0 }' \
    Makefile.am)
case $mode in
asan)
    san=address,undefined
    # run_moe.sh is left out: its hcomm-perf runs (-d all) outgrew their 120 s
    # limits under ASan on 2 busy cores
    tests=${*:-$unit tests/coll/run_coll.sh tests/coll/run_streams.sh tests/coll/run_device.sh
        tests/coll/run_unstack.sh tests/coll/run_lazy.sh tests/fault/kill_peer.sh
        tests/fault/run_stuck.sh tests/fault/run_revoke.sh tests/fault/run_shrink_fail.sh
        tests/netns/run_slow_link.sh tests/shim/run_shim.sh}
    # every report fails the process; leaks too, at each rank's exit
    export ASAN_OPTIONS=abort_on_error=0:exitcode=86:detect_leaks=1
    export LSAN_OPTIONS="suppressions=$(pwd)/tests/sanitize/lsan.supp" # the tree's top (cd above)
    export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:exitcode=86
    # run_slow_link.sh: as under TSan, the ranks' CPU paces 300 Mbit/s links
    # (two CI runs named link 2->3 on even links), so slower wires
    export RATE=80mbit SLOW_RATE=24mbit BYTES=524288
    ;;
tsan)
    san=thread
    tests=${*:-tests/coll/run_streams.sh tests/coll/run_device.sh tests/coll/run_overlap.sh
        tests/fault/run_stuck.sh tests/fault/run_revoke.sh tests/fault/run_shrink_fail.sh tests/netns/run_slow_link.sh
        tests/shim/run_shim.sh}
    export TSAN_OPTIONS=exitcode=86:halt_on_error=0:second_deadlock_stack=1
    # run_slow_link.sh: under TSan its ranks' CPU paces 300 Mbit/s links,
    # and a link slower than the CPU is the one to find
    export RATE=80mbit SLOW_RATE=24mbit BYTES=524288
    ;;
*)
    echo "run.sh: MODE is asan or tsan" >&2
    exit 2
    ;;
esac
dir=${HC_SANITIZE_DIR:-/tmp/hcomm-$mode}
rm -rf "$dir" && mkdir -p "$dir" || exit 2
git ls-files -co --exclude-standard | tar -cf - -T - | tar -xf - -C "$dir" || exit 2
cd "$dir" || exit 2
echo "sanitize: $mode build in $dir"
./autogen.sh >/dev/null 2>&1 && ./configure -q --enable-werror --enable-sanitizers=$san &&
    make -j"$(nproc)" -s >/dev/null || { echo "sanitize: $mode build failed" >&2; exit 1; }
# shellcheck disable=SC2086
make -s check TESTS="$(echo $tests)" >/dev/null 2>&1
rc=$?
for f in $(echo $tests); do
    s=$(sed -n 's/^:test-result: //p' "$f.trs" 2>/dev/null | head -1)
    echo "sanitize $mode: ${s:-NONE} $f"
    case $s in PASS|SKIP) ;; *) tail -60 "$f.log" 2>/dev/null; rc=1 ;; esac
done
# a report inside a rank that the test itself did not fail on
if grep -l "ERROR: AddressSanitizer\|runtime error:\|WARNING: ThreadSanitizer\|ERROR: LeakSanitizer" \
       tests/*/*.log >/dev/null 2>&1; then
    grep -H -m3 "ERROR: AddressSanitizer\|runtime error:\|WARNING: ThreadSanitizer\|ERROR: LeakSanitizer" \
        tests/*/*.log
    rc=1
fi
echo "sanitize $mode: $([ $rc -eq 0 ] && echo clean || echo FAILED)"
exit $rc
