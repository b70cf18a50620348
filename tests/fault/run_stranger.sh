#!/bin/sh
# run_stranger.sh - strangers on every port a job listens on (issue 19 item
# 15): stranger opens 1,000 silent connections to each, and connects 200 times
# a second to each to send 64 random bytes, during init and during the run of
# a 4-rank hcomm-perf allreduce over tcp. HCOMM_WARMUP=0 connects pairs on
# first use, so the transport's listeners are attacked while pairs connect; the
# ranks start 0.3 s after hcomm-run binds the root, so the root's backlog is
# full of strangers when rank 0 takes it over. Checks, against the same job
# without strangers (the median of three runs each): the run completes with
# correct results; init ("init took", bootstrap included) is less than 1 s
# longer; each process's peak fds stay within what the listeners' bounds allow
# (two bootstrap gates of 128 in rank 0, 64 in the tcp listener, 32 spare);
# its peak memory within 16 MiB more.
# shellcheck source=tests/test_lib.sh
. "$(dirname "$0")/../test_lib.sh"
run=$top/tools/hcomm-run
perf=$top/perf/hcomm-perf
bin=$top/tests/fault/stranger
need "$run" "$perf" "$bin"
scratch stranger

# job SILENT RATE: one run; prints "INIT_MS PEAK_FDS PEAK_RSS_KIB" and the
# run's status; the log in $out.
job() {
    HCOMM_TRANSPORT=tcp HCOMM_WARMUP=0 HCOMM_TIMEOUT=60 HCOMM_LOG_LEVEL=debug \
        HCOMM_LOG_SUBSYS=init timeout 200 "$bin" -s "$1" -r "$2" -t 180 -- "$run" -n 4 \
        sh -c "sleep 0.3; exec '$perf' all_reduce -b 8 -e 1M -f 4 -n 20 -w 2" > "$out" 2>&1
    st=$?
    ms=$(sed -n 's/.*init took \([0-9.]*\) ms.*/\1/p' "$out" | sort -n | tail -1)
    # shellcheck disable=SC2046 # two numbers, one word each
    set -- $(sed -n 's/^stranger: .*peak_fds \([0-9]*\) peak_rss_kib \([0-9]*\)/\1 \2/p' "$out")
    echo "${ms:-0} ${1:-0} ${2:-0} $st"
}

# median of three runs: init ms, and the peaks of all three
three() {
    : > "$tmp/runs"
    for i in 1 2 3; do
        job "$1" "$2" >> "$tmp/runs"
        cp "$out" "$tmp/log.$1.$i"
    done
    init=$(cut -d' ' -f1 "$tmp/runs" | sort -n | sed -n 2p)
    fds=$(cut -d' ' -f2 "$tmp/runs" | sort -n | tail -1)
    rss=$(cut -d' ' -f3 "$tmp/runs" | sort -n | tail -1)
    bad=$(awk '$4 != 0' "$tmp/runs" | wc -l)
    echo "$init $fds $rss $bad"
}

# shellcheck disable=SC2046 # four numbers, one word each
set -- $(three 0 0)
b_init=$1 b_fds=$2 b_rss=$3 b_bad=$4
# shellcheck disable=SC2046
set -- $(three 1000 200)
a_init=$1 a_fds=$2 a_rss=$3 a_bad=$4
grep -h '^stranger:' "$tmp"/log.1000.* | sed 's/^/  /'
echo "  without strangers: init ${b_init} ms, peak fds $b_fds, peak rss $b_rss KiB"
echo "  with strangers:    init ${a_init} ms, peak fds $a_fds, peak rss $a_rss KiB"

[ "$b_bad" -eq 0 ] && grep -q 'Out of bounds values : 0 OK' "$tmp/log.0.1"
result "4 ranks over tcp, no strangers: the runs complete" $? "$tmp/log.0.1"
ok=1
[ "$a_bad" -eq 0 ] && grep -q 'Out of bounds values : 0 OK' "$tmp/log.1000.1" &&
    grep -q '^stranger: ports [1-9]' "$tmp/log.1000.1" && ok=0
result "the same with strangers on every port: the runs complete" $ok "$tmp/log.1000.1"
awk -v a="$a_init" -v b="$b_init" 'BEGIN { exit !(a - b < 1000) }'
result "init with strangers less than 1 s longer (${a_init} vs ${b_init} ms)" $?
[ "$a_fds" -le $((b_fds + 2 * 128 + 64 + 32)) ]
result "peak fds bounded ($a_fds vs $b_fds)" $?
[ "$a_rss" -le $((b_rss + 16384)) ]
result "peak memory bounded ($a_rss vs $b_rss KiB)" $?
finish
