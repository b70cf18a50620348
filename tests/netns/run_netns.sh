#!/bin/sh
# run_netns.sh - multi-host on one machine (tests/netns/netns_lib.sh): 3
# namespaces as nodes, 2 ranks each, 1 Gbit/s links. Ranks in one namespace
# share memory (shm), ranks in different ones talk tcp over the veths. Checks
# that every collective is exact there and that allreduce picks the
# hierarchical algorithm by itself (no HCOMM_ALGO). Then the same matrix with
# HCOMM_NET=ofi (provider tcp;ofi_rxm) and HCOMM_NET=ucx (UCX_TLS=tcp, else
# UCX would find the namespaces share memory) between the namespaces, where
# those transports open. A root host name that resolves to loopback on rank
# 0's node still serves the others; a root name no DNS server answers fails
# init within HCOMM_TIMEOUT. Skips without root or ip.
# shellcheck source=tests/test_lib.sh
. "$(dirname "$0")/../test_lib.sh"
check="$top/tests/coll/.libs/coll_check" perf="$top/perf/.libs/hcomm-perf"
[ -x "$check" ] || check="$top/tests/coll/coll_check"
[ -x "$perf" ] || perf="$top/perf/hcomm-perf"
need "$check" "$perf" "$top/examples/init_env"
NODES=3 PPN=2
# shellcheck source=tests/netns/netns_lib.sh
. "$(dirname "$0")/netns_lib.sh"
netns_setup
export LD_LIBRARY_PATH="$top/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" HCOMM_TIMEOUT=60
dir=$netns_dir
# the transport between nodes: tcp by default (ofi and ucx have no RDMA
# hardware to drive here), or the first HCOMM_NET names (HCOMM_NET=ofi)
net=${HCOMM_NET:-tcp}
net=${net%%,*}
# a failed check shows the last lines of every rank's output and log
on_fail() { tail -n 5 "$dir"/out.* "$dir"/log.* 2>/dev/null | head -n 40; }

netns_launch timeout 300 "$check" --quick
result "coll_check --quick on $NODES nodes x $PPN ranks" $?
HCOMM_ALGO=allreduce:leader netns_launch timeout 300 "$check" --quick --coll allreduce --no-extras
result "leaders' allreduce (forced) exact on $NODES nodes x $PPN ranks" $?
HCOMM_ALGO=alltoall:hier HCOMM_LOG_LEVEL=debug HCOMM_LOG_SUBSYS=algo \
    netns_launch timeout 300 "$check" --quick --coll alltoall --no-extras
result "hierarchical alltoall (forced) exact on $NODES nodes x $PPN ranks" $?
# it really ran: schedules built as hier (selection says so when it cannot be)
grep -q 'alltoall of .*: hier' "$dir/log.0" && ! grep -q 'alltoall:hier needs nodes' "$dir/log.0"
result "the hierarchical alltoall was built, not pairwise" $?
HCOMM_LOG_LEVEL=debug HCOMM_LOG_SUBSYS=algo,init netns_launch timeout 300 "$perf" all_reduce -b 8 -e 4M -f 8 -n 3 -w 1
result "hcomm-perf all_reduce on $NODES nodes x $PPN ranks" $?
# each peer's transport, chosen at init; connections made only for pairs in use
tcp=$(peers_over "$dir/log.0" "$net") shm=$(peers_over "$dir/log.0" shm)
ctcp=$(grep -c "connected over $net" "$dir/log.0") cshm=$(grep -c 'connected over shm' "$dir/log.0")
[ "$tcp" -eq $((PPN * (NODES - 1))) ] && [ "$shm" -eq $((PPN - 1)) ] &&
    [ "$ctcp" -ge 1 ] && [ "$ctcp" -le "$tcp" ] && [ "$cshm" -ge 1 ] && [ "$cshm" -le "$shm" ]
result "rank 0: $net for $tcp peers, shm for $shm; connected $ctcp and $cshm of them" $?
grep -h 'cross-node link measured' "$dir/log.0" | sed 's/.*cross-node/  cross-node/'
grep -q 'cross-node link measured' "$dir/log.0"
result "the cross-node link was measured at init" $?
grep -h 'every rank busy' "$dir/log.0" | sed 's/.*a step/  a step/'
grep 'every rank busy' "$dir/log.0" | awk '{ v = $(NF - 1) + 0 } END { exit !(NR > 0 && v > 0) }'
result "the step floor was measured at init" $?
grep -h '8-byte allreduce measured' "$dir/log.0" | sed 's/.*8-byte/  8-byte/'
grep '8-byte allreduce measured' "$dir/log.0" | tail -1 |
    awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^(rd|rabenseifner|tree|hier|leader)$/) { n++; if ($(i + 1) + 0 <= 0) bad = 1 } }
         END { exit !(n == 5 && !bad) }'
result "each algorithm's small allreduce was measured at init" $?
grep 'allreduce of' "$dir/log.0" | sed 's/.*allreduce of/  allreduce of/' | sort -u | sort -t' ' -k5n
grep -q 'allreduce of .*: hier' "$dir/log.0"
result "hierarchical allreduce selected without HCOMM_ALGO" $?
# the root named by a host name that is loopback on rank 0's node and node
# 0's address elsewhere: rank 0 listens on every interface, not on loopback,
# and rank 3 beside it (ranks placed round robin) listens where other nodes
# reach it
if netns_hosts hcroot; then
    PLACE=rr ROOT_HOST=hcroot HCOMM_TIMEOUT=20 netns_launch timeout 120 "$check" --quick \
        --coll alltoall --no-extras
    result "a root name that is loopback on rank 0's node: every rank reached (ranks round robin)" $?
else
    result "a root name that is loopback on rank 0's node: cannot write /etc/netns" 77
fi
# the fabrics between the namespaces; shm still inside each
for net in ofi ucx; do
    case $net in
    ofi) v=ofi-tcp set="HCOMM_OFI_PROVIDER=tcp;ofi_rxm" ;;
    ucx) v=ucx-tcp set="UCX_TLS=tcp" ;;
    esac
    why=$(tl_unusable "$v")
    if [ -n "$why" ]; then
        result "HCOMM_NET=$net: $why" 77
        continue
    fi
    rm -f "$dir"/log.*
    # shellcheck disable=SC2086 # set is one assignment
    netns_launch env HCOMM_NET=$net $set HCOMM_LOG_LEVEL=info HCOMM_LOG_SUBSYS=init \
        timeout 300 "$check" --quick
    rc=$?
    # rank 0's communicators (the world's and the splits') reach every rank
    # of another namespace over the fabric, none over tcp
    got=$(peers_over "$dir/log.0" $net) tcp=$(peers_over "$dir/log.0" tcp)
    [ $rc -eq 0 ] && [ "$got" -ge $((PPN * (NODES - 1))) ] && [ "$tcp" -eq 0 ] || rc=1
    result "HCOMM_NET=$net $set: coll_check --quick on $NODES nodes x $PPN ranks; rank 0 chose $net $got times, tcp $tcp" $rc
done
# a root name whose DNS server never answers (an address on node 0's subnet
# that nobody holds, with a made-up neighbour entry so that no failed ARP
# ends the wait early; resolv.conf alone would wait 3 x 10 s): init fails
# within HCOMM_TIMEOUT=2 and says so, instead of hanging on the resolver.
# ip netns exec mounts the namespace's resolv.conf over /etc/resolv.conf,
# which glibc reads where nsswitch.conf sends host names to dns.
conf=/etc/netns/${tag}n0/resolv.conf
if [ ! -e /etc/resolv.conf ] || ! grep -q '^hosts:.*[[:space:]]dns' /etc/nsswitch.conf 2> /dev/null; then
    result "a root name no DNS server answers: no /etc/resolv.conf, or nsswitch.conf's hosts has no dns" 77
elif mkdir -p "${conf%/*}" && printf 'nameserver %s.250\noptions timeout:10 attempts:3\n' "$sub" > "$conf" &&
    ip -n "${tag}n0" neigh replace "$sub.250" lladdr 02:00:00:00:00:fa dev "${tag}b0" nud permanent; then
    t0=$(date +%s)
    ip netns exec "${tag}n0" env HCOMM_RANK=0 HCOMM_NRANKS=1 HCOMM_ROOT=hc-no-answer.test:$((20000 + $$ % 20000)) \
        HCOMM_COOKIE=00112233445566778899aabbccddeeff HCOMM_TIMEOUT=2 timeout 60 "$top/examples/init_env" \
        > "$dir/out.dns" 2>&1
    rc=$? secs=$(($(date +%s) - t0))
    rm -f "$conf"
    out=$dir/out.dns
    [ $rc -eq 1 ] && [ $secs -lt 15 ] && has 'cannot resolve hc-no-answer.test:.*no answer within 2.0 s' &&
        has 'hcomm_comm_init_env: timed out'
    result "a root name no DNS server answers: init fails in $secs s (HCOMM_TIMEOUT=2)" $?
else
    result "a root name no DNS server answers: cannot write /etc/netns or a neighbour entry" 77
fi
finish
