#!/bin/sh
# run_topo.sh - the plan-based algorithms on real processes: topology files put
# the ranks of this host on virtual nodes (tcp between nodes, shm inside), and
# coll_check runs every collective with the cost model's choice and with each
# algorithm forced. Also hcomm-topo on a file and on a synthetic 1024 x 8 cluster.
top=${top_builddir:-.}
run="$top/tools/hcomm-run" check="$top/tests/coll/coll_check" topo="$top/tools/hcomm-topo"
for b in "$run" "$check" "$topo"; do
    [ -x "$b" ] || { echo "SKIP: $b not built"; exit 77; }
done
dir=$(mktemp -d /tmp/hcomm-topo-test.XXXXXX)
trap 'rm -rf "$dir"' EXIT
export HCOMM_TIMEOUT=60

# nodes: a list of rank lists, e.g. "0,2 1,3"
write_topo() {
    file=$1; shift
    { echo '<?xml version="1.0"?>'
      echo '<hcomm_topology version="1">'
      echo '  <link class="cross_node" alpha_us="20" bw_gbps="0.5"/>'
      id=0
      for node in "$@"; do
          echo "  <node id=\"$id\" host=\"virtual$id\">"
          for r in $(echo "$node" | tr ',' ' '); do echo "    <rank id=\"$r\"/>"; done
          echo "  </node>"
          id=$((id + 1))
      done
      echo '</hcomm_topology>'; } > "$file"
}
write_topo "$dir/rr2x2.xml" 0,2 1,3
write_topo "$dir/rr3x2.xml" 0,3 1,4 2,5
write_topo "$dir/uneven.xml" 3 0,2,5 1,4

pass=0 fail=0
one() { # NRANKS FILE ALGO [coll_check args]; FILE "-": no file (one node)
    n=$1 file=$2 algo=$3; shift 3
    log="$dir/log" tf="$dir/$file"
    [ "$file" = - ] && tf=
    if HCOMM_TOPO_FILE="$tf" HCOMM_ALGO="$algo" timeout 300 "$run" -n "$n" --timeout 280 \
        "$check" "$@" > "$log" 2>&1; then
        pass=$((pass + 1)); echo "PASS n=$n $file HCOMM_ALGO=$algo $*"
    else
        fail=$((fail + 1)); echo "FAIL n=$n $file HCOMM_ALGO=$algo $*"
        grep -E '^FAIL|coll_check: rank|hcomm-run' "$log" | head -10 | sed 's/^/  /'
    fi
}
one 4 rr2x2.xml "" --quick
one 4 rr2x2.xml "" --coll allreduce --max-count 1048579
one 6 rr3x2.xml "" --quick
one 6 uneven.xml "" --quick
for f in rr2x2.xml:4 uneven.xml:6; do
    one "${f#*:}" "${f%:*}" "allreduce:hier,broadcast:hier,reduce:hier,allgather:hier,reduce_scatter:hier" --quick
    one "${f#*:}" "${f%:*}" "allreduce:tree,broadcast:tree,reduce:tree" --quick
    one "${f#*:}" "${f%:*}" "allreduce:rabenseifner,allgather:bruck" --quick
    one "${f#*:}" "${f%:*}" "allreduce:leader" --coll allreduce --quick
    one "${f#*:}" "${f%:*}" "ring" --quick
done
# the same algorithms inside one node, over shm only and over tcp only
plan="allreduce:hier,broadcast:tree,reduce:hier,allgather:hier,reduce_scatter:hier"
export HCOMM_TRANSPORT=shm
one 4 - "$plan" --quick
one 5 - "allreduce:tree,reduce:tree,allgather:bruck" --quick
export HCOMM_TRANSPORT=tcp
one 3 - "$plan" --quick
one 4 - "allreduce:rabenseifner" --quick
one 5 - "allreduce:leader" --coll allreduce --quick
unset HCOMM_TRANSPORT

# the file's nodes decide the transports: tcp between virtual nodes, shm inside
HCOMM_TOPO_FILE="$dir/rr2x2.xml" HCOMM_LOG_LEVEL=debug HCOMM_LOG_SUBSYS=init \
    "$run" -n 4 "$check" --coll barrier --quick > "$log" 2>&1
ntcp=$(grep -c 'connected over tcp' "$log") nshm=$(grep -c 'connected over shm' "$log")
if [ "$ntcp" -eq 8 ] && [ "$nshm" -eq 4 ]; then
    pass=$((pass + 1)); echo "PASS virtual nodes: 8 tcp and 4 shm connections"
else
    fail=$((fail + 1)); echo "FAIL virtual nodes: $ntcp tcp and $nshm shm connections (want 8 and 4)"
fi

# hcomm-topo: a file, and plans at a scale this machine cannot run
if "$topo" --topo "$dir/uneven.xml" --ranks 6 > "$log" 2>&1 && grep -q '^ring 0 (6 ranks)' "$log" &&
   grep -q '^tree 1' "$log" && grep -q '^rail 2' "$log"; then
    pass=$((pass + 1)); echo "PASS hcomm-topo --topo"
else
    fail=$((fail + 1)); echo "FAIL hcomm-topo --topo"; head -20 "$log"
fi
if "$topo" --synthetic 1024x8x4 --quiet > "$log" 2>&1 && grep -q '^# cluster: 8192 ranks on 1024 nodes' "$log"; then
    pass=$((pass + 1)); echo "PASS hcomm-topo --synthetic 1024x8x4 ($(grep 'plans built' "$log"))"
else
    fail=$((fail + 1)); echo "FAIL hcomm-topo --synthetic"; head -20 "$log"
fi
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
