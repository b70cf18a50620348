# netns_lib.sh - sourced by the multi-host tests and benchmarks, after
# tests/test_lib.sh (top, skip, need_root, scratch): NODES network namespaces
# joined by veth pairs to a bridge in a namespace of its own, each node's link
# limited with tc tbf to RATE (none: no limit), and a launcher that starts PPN ranks per
# namespace. Set NODES, PPN, RATE (default 1gbit), PLACE (block: rank r on
# node r / PPN; rr: on node r % NODES) first. The namespaces and $netns_dir
# go when the script ends.
: "${NODES:=3}" "${PPN:=2}" "${RATE:=1gbit}" "${BURST:=256kb}" "${PLACE:=block}"
tag=hc$$ sub=10.213.$(($$ % 200 + 20))
scratch netns
# shellcheck disable=SC2154 # tmp: set by scratch
netns_dir=$tmp

netns_cleanup() {
    for p in $(cat "$netns_dir"/pids 2>/dev/null); do kill -9 "$p" 2>/dev/null; done
    for i in $(seq 0 $((NODES - 1))); do ip netns del "${tag}n$i" 2>/dev/null; done
    ip netns del "${tag}h" 2>/dev/null
    rm -rf /etc/netns/"${tag}"n*
    rmdir /etc/netns 2>/dev/null # where this made it
}
at_exit netns_cleanup

# netns_setup: builds the namespaces, or SKIPs (exit 77) saying why it cannot.
netns_setup() {
    need_root "ip netns"
    command -v ip > /dev/null || skip "no ip (iproute2)"
    (
        ip netns add "${tag}h" && ip -n "${tag}h" link add br0 type bridge &&
            ip -n "${tag}h" link set br0 up || exit 1
        for i in $(seq 0 $((NODES - 1))); do
            ns=${tag}n$i
            ip netns add "$ns" &&
                ip link add "${tag}a$i" type veth peer name "${tag}b$i" &&
                ip link set "${tag}a$i" netns "${tag}h" && ip link set "${tag}b$i" netns "$ns" &&
                ip -n "${tag}h" link set "${tag}a$i" master br0 up &&
                ip -n "$ns" addr add "$sub.$((i + 1))/24" dev "${tag}b$i" &&
                ip -n "$ns" link set "${tag}b$i" up && ip -n "$ns" link set lo up &&
                { [ "$RATE" = none ] ||
                    tc -n "$ns" qdisc add dev "${tag}b$i" root tbf rate "$RATE" burst "$BURST" \
                        latency 50ms; } ||
                exit 1
        done
    ) 2> "$netns_dir/setup.err" ||
        skip "cannot build the namespaces: $(head -n 1 "$netns_dir/setup.err")"
}

# netns_hosts NAME: NAME resolves to 127.0.1.1 on node 0 (Debian's /etc/hosts
# line for the host's own name) and to node 0's address on the others (ip
# netns exec reads /etc/netns/NS/hosts as /etc/hosts).
netns_hosts() {
    for i in $(seq 0 $((NODES - 1))); do
        mkdir -p "/etc/netns/${tag}n$i" || return 1
        { echo "127.0.0.1 localhost"; if [ "$i" = 0 ]; then echo "127.0.1.1 $1"; else echo "$sub.1 $1"; fi; } \
            > "/etc/netns/${tag}n$i/hosts" || return 1
    done
}

# netns_launch PROG ARGS...: every rank in its namespace, rank 0 the root
# (HCOMM_ROOT: node 0's address, or ROOT_HOST where set); rank
# r's output in $netns_dir/out.r, its log in $netns_dir/log.r; 0 when all exit 0.
netns_launch() {
    n=$((NODES * PPN)) port=$((20000 + $$ % 20000))
    cookie=$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')
    : > "$netns_dir/pids"
    for r in $(seq 0 $((n - 1))); do
        if [ "$PLACE" = rr ]; then node=$((r % NODES)); else node=$((r / PPN)); fi
        ip netns exec "${tag}n$node" env HCOMM_RANK=$r HCOMM_NRANKS=$n \
            HCOMM_ROOT="${ROOT_HOST:-$sub.1}:$port" HCOMM_COOKIE="$cookie" HCOMM_SOCKET_IFNAME="${tag}b" \
            HCOMM_LOG_FILE="$netns_dir/log.$r" "$@" > "$netns_dir/out.$r" 2>&1 &
        echo $! >> "$netns_dir/pids"
    done
    rc=0
    for p in $(cat "$netns_dir/pids"); do wait "$p" || rc=1; done
    return $rc
}
