#!/bin/sh
# run_topo.sh - the plan-based algorithms on real processes: topology files put
# the ranks of this host on virtual nodes (tcp between nodes, shm inside), and
# coll_check runs every collective with the cost model's choice and with each
# algorithm forced. Also hcomm-topo on a file and on a synthetic 1024 x 8 cluster.
# shellcheck source=tests/test_lib.sh
. "$(dirname "$0")/../test_lib.sh"
run="$top/tools/hcomm-run" check="$top/tests/coll/coll_check" topo="$top/tools/hcomm-topo"
need "$run" "$check" "$topo"
export HCOMM_TIMEOUT=60
scratch topo

# write_topo FILE NODE...: a topology file; a node is a list of ranks, e.g. 0,2
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
write_topo "$tmp/rr2x2.xml" 0,2 1,3
write_topo "$tmp/rr3x2.xml" 0,3 1,4 2,5
write_topo "$tmp/uneven.xml" 3 0,2,5 1,4

one() { # NRANKS FILE ALGO [coll_check args]; FILE "-": no file (one node)
    n=$1 file=$2 algo=$3; shift 3
    tf="$tmp/$file"
    [ "$file" = - ] && tf=
    try 300 HCOMM_TOPO_FILE="$tf" HCOMM_ALGO="$algo" "$run" -n "$n" --timeout 280 "$check" "$@"
    result "n=$n $file HCOMM_ALGO=$algo $*" $?
}
one 4 rr2x2.xml "" --quick
one 4 rr2x2.xml "" --coll allreduce --max-count 1048579
one 6 rr3x2.xml "" --quick
one 6 uneven.xml "" --quick
# hier cannot serve alltoall on nodes of 1, 3 and 2 ranks: passed over, never used
one 6 uneven.xml "alltoall:hier" --coll alltoall --quick
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
HCOMM_TOPO_FILE="$tmp/rr2x2.xml" HCOMM_NET=tcp HCOMM_LOG_LEVEL=debug HCOMM_LOG_SUBSYS=init \
    "$run" -n 4 "$check" --coll barrier --quick > "$out" 2>&1
ntcp=$(grep -c 'connected over tcp' "$out") nshm=$(grep -c 'connected over shm' "$out")
[ "$ntcp" -eq 8 ] && [ "$nshm" -eq 4 ]
result "virtual nodes: $ntcp tcp and $nshm shm connections (want 8 and 4)" $?

# split and shrunk children keep the file's link costs (their model is built
# from discovery: the file describes the parent)
HCOMM_TOPO_FILE="$tmp/rr2x2.xml" HCOMM_LOG_LEVEL=debug HCOMM_LOG_SUBSYS=init \
    "$run" -n 4 "$check" --quick > "$out" 2>&1
st=$?
nkids=$(grep -c "cross-node link: .* (the parent communicator's)" "$out")
nfile=$(grep -c "cross-node link: 20 us, 0.5 GB/s (the parent communicator's)" "$out")
[ "$st" -eq 0 ] && [ "$nkids" -gt 0 ] && [ "$nfile" -eq "$nkids" ]
result "children of a topology-file job: $nfile of $nkids inits keep its 20 us, 0.5 GB/s" $?

# HCOMM_TOPO_DUMP_FILE naming the file the job loads: rank 0 of the world
# writes its model beside it and renames it over (its "w" emptied the file
# while the others read it: "no <hcomm_topology> element"), and the split and
# shrunk children coll_check makes do not replace it with theirs (the file
# then held a child's 2 or 3 ranks); what is left loads for 4 ranks again
cp "$tmp/rr2x2.xml" "$tmp/same.xml"
HCOMM_TOPO_FILE="$tmp/same.xml" HCOMM_TOPO_DUMP_FILE="$tmp/same.xml" \
    "$run" -n 4 "$check" --quick > "$out" 2>&1 &&
    "$topo" --topo "$tmp/same.xml" --ranks 4 >> "$out" 2>&1 && has '^ring 0 (4 ranks)' &&
    [ -z "$(find "$tmp" -name 'same.xml.tmp.*')" ]
result "HCOMM_TOPO_DUMP_FILE = HCOMM_TOPO_FILE: the job runs, the world's model is left" $?

# hcomm-topo: a file, and plans at a scale this machine cannot run
"$topo" --topo "$tmp/uneven.xml" --ranks 6 > "$out" 2>&1 && has '^ring 0 (6 ranks)' &&
    has '^tree 1' && has '^rail 2'
result "hcomm-topo --topo" $?
! "$topo" --topo "$tmp/uneven.xml" > "$out" 2>&1 && has 'needs --ranks N'
result "hcomm-topo --topo without --ranks: says what it needs" $?
"$topo" --synthetic 1024x8x4 --quiet > "$out" 2>&1 && has '^# cluster: 8192 ranks on 1024 nodes'
st=$?
result "hcomm-topo --synthetic 1024x8x4 ($(grep 'plans built' "$out"))" $st
# hcomm-topo asks the communicators' own selection: on the uneven nodes the
# hierarchical alltoall gets no prediction and is never chosen, even forced
HCOMM_ALGO=alltoall:hier "$topo" --topo "$tmp/uneven.xml" --ranks 6 -b 8 -e 1M > "$out" 2>&1 &&
    awk '/^# alltoall:/ { a = 1; next }
         /^# transports/ { a = 0 }
         a && !/^#/ { n++; if ($3 != "-" || $(NF - 1) != "pairwise") bad++ }
         END { exit !(n > 0 && bad == 0) }' "$out"
result "hcomm-topo: alltoall on uneven nodes never hier, even forced" $?
HCOMM_ALGO=allreduce:leader "$topo" --topo "$tmp/rr2x2.xml" --ranks 4 -b 8 -e 64 > "$out" 2>&1 &&
    has ' leader *forced$'
result "hcomm-topo: HCOMM_ALGO's choice, shown as forced" $?
bad=0
for arg in "--ranks abc" "--ranks -3" "--ranks 2x" "--rings 5x" "--synthetic 2x3junk"; do
    # shellcheck disable=SC2086 # an option and its value
    "$topo" $arg > "$out" 2>&1
    [ $? = 2 ] || { echo "hcomm-topo $arg: not refused" >> "$out"; bad=1; }
done
[ $bad = 0 ]
result "hcomm-topo refuses numbers that are not whole or in range" $?
finish
