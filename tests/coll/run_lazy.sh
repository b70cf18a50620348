#!/bin/sh
# run_lazy.sh - connections are made the first time a schedule uses a pair:
# with every allreduce forced onto the ring, each of 6 ranks connects its two
# ring neighbours and nothing else, over every transport that opens here
# (counted from the debug log's "rank N connected over TL" lines); alltoall,
# where every pair talks, connects all 5 peers (the count can see more).
# shellcheck source=tests/test_lib.sh
. "$(dirname "$0")/../test_lib.sh"
run="$top/tools/hcomm-run" check="$top/tests/coll/coll_check" topo="$top/tools/hcomm-topo"
need "$run" "$check" "$topo"
export HCOMM_TIMEOUT=60
scratch lazy
n=6

words() { tr '\n' ' ' | sed 's/ $//'; }

# connected LOG RANK TL: the peers rank RANK connected over TL, sorted, one line
connected() {
    grep " hcomm DEBUG init .* connected over $3\$" "$1" | grep ":$2 hcomm " |
        sed 's/.* rank \([0-9]*\) connected over.*/\1/' | sort -n | words
}

# lazy TL COLL ALGO EXPECT: coll_check of COLL (HCOMM_ALGO=ALGO) over TL; each
# rank must have connected exactly the peers EXPECT prints for it
lazy() {
    tl=$1 coll=$2 algo=$3 expect=$4
    try 300 HCOMM_TRANSPORT="$tl" HCOMM_ALGO="$algo" HCOMM_LOG_LEVEL=debug \
        HCOMM_LOG_SUBSYS=init "$run" -n $n "$check" --quick --coll "$coll" --dtype float32 \
        --no-extras
    ok=$?
    for r in $(seq 0 $((n - 1))); do
        got=$(connected "$out" "$r" "$tl") want=$($expect "$r")
        chosen=$(grep ":$r hcomm INFO init" "$out" > "$out.r" && peers_over "$out.r" "$tl")
        if [ "$got" != "$want" ] || [ "$chosen" != $((n - 1)) ]; then
            echo "rank $r over $tl: connected [$got], expected [$want]; chose $tl for $chosen peers"
            ok=1
        fi
    done
    result "$coll ($algo) over $tl: each rank connected only [$($expect 0)] (rank 0)" $ok
}

neighbours() { printf '%s\n' $((($1 + n - 1) % n)) $((($1 + 1) % n)) | sort -n | words; }
everyone() { seq 0 $((n - 1)) | grep -vx "$1" | words; }

"$topo" --transports > "$tmp/tls" 2>&1
cat "$tmp/tls"
for tl in $(sed -n 's/^transport \([a-z]*\) *opens here$/\1/p' "$tmp/tls"); do
    lazy "$tl" allreduce ring neighbours
    lazy "$tl" alltoall pairwise everyone
done
finish
