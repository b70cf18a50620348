#!/bin/sh
# run_slow_link.sh - which link is slow (docs/resilience.md): 4 namespaces as
# nodes, one rank each, every link limited to 300 Mbit/s by tc tbf; node 1's
# link then to SLOW_RATE (120 Mbit/s, 2.5x slower). Rank 0's slow-link test must name links from rank
# 1, and no link that neither leaves nor enters rank 1 (links into it carry
# its acknowledgements' delay), in its warn line and through
# hcomm_comm_get_health; with every link alike it must name none at the end,
# and none but in one run of steps (a noisy machine slows a link for a
# moment: docs/resilience.md's accuracy bound, no clean trial flagging anyone
# more than once). Rank 0 judges every 0.2 s here (1 s
# by default). Schedules are not pipelined (HCOMM_CHUNK_BYTES=0) but in a
# second clean trial: a sender that feeds two peers at once halves each link,
# and Rabenseifner's pipelined rounds read 0->1 and 2->3 at about half the
# median on even links; rank 0 holds such links to a third of it
# (docs/resilience.md, "Which link is slow"). RATE, SLOW_RATE, STEPS and
# BYTES can be set: a slow link is only found where the wire, not the CPU,
# paces the ranks (sanitizers: slower wires). Skips without root or ip.
# shellcheck source=tests/test_lib.sh
. "$(dirname "$0")/../test_lib.sh"
prog="$top/tests/netns/.libs/slow_link"
[ -x "$prog" ] || prog="$top/tests/netns/slow_link"
need "$prog"
# a small bucket: tbf's default here (256 KB) lets a link that idled send
# that much at the veth's speed, which no wire does
NODES=4 PPN=1 BURST=64kb
: "${RATE:=300mbit}" "${SLOW_RATE:=120mbit}" "${STEPS:=150}" "${BYTES:=1048576}"
# shellcheck source=tests/netns/netns_lib.sh
. "$(dirname "$0")/netns_lib.sh"
netns_setup
export LD_LIBRARY_PATH="$top/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" HCOMM_TIMEOUT=60 \
    HCOMM_TRANSPORT=tcp HCOMM_HEALTH_PERIOD=0.2 HCOMM_CHUNK_BYTES=0
dir=$netns_dir
on_fail() { tail -n 5 "$dir"/out.* "$dir"/log.* 2>/dev/null | head -n 40; }

# clean_trial WHAT: every link alike; rank 0 names none at the end, and
# none but in one run of steps
clean_trial() {
    rm -f "$dir"/log.* # the library appends: this run's lines alone
    netns_launch timeout 300 "$prog" "$STEPS" "$BYTES" -1
    rc=$?
    cp "$dir/out.0" "$out"
    test $rc = 0 && [ "$(grep -c 'WARN.* slow link' "$dir/log.0")" -le 1 ]
    result "4 nodes, every link $RATE$1: no link named ($(sed -n 's/^slow_link: //p' "$out"))" $?
}
clean_trial ""
# pipelined as by default: senders that feed two peers at once are not named
unset HCOMM_CHUNK_BYTES
clean_trial ", pipelined"
export HCOMM_CHUNK_BYTES=0

rm -f "$dir"/log.* # the library appends: this run's lines alone
# shellcheck disable=SC2154 # tag: set by netns_lib.sh
tc -n "${tag}n1" qdisc change dev "${tag}b1" root tbf rate "$SLOW_RATE" burst "$BURST" latency 50ms
netns_launch timeout 300 "$prog" "$STEPS" "$BYTES" 1
rc=$?
cp "$dir/out.0" "$out"
test $rc = 0 && has 'slow link 1 -> [023] (tcp, host' "$dir/log.0" &&
    ! grep 'slow link' "$dir/log.0" | grep -v 'slow link 1 -> ' | grep -qv 'slow link [023] -> 1 '
result "rank 1's link at $SLOW_RATE: links from rank 1 named, none that misses it ($(sed -n 's/^slow_link: //p' "$out"))" $?
finish
