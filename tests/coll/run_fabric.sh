#!/bin/sh
# run_fabric.sh - the collective matrix over the library-backed transports:
# coll_check --quick (every collective and dtype, counts 0, 7 and 1023) on 2
# to 5 ranks with HCOMM_TRANSPORT=ofi (providers tcp;ofi_rxm and shm) and
# HCOMM_TRANSPORT=ucx (UCX_TLS=tcp and UCX_TLS=posix,cma), and the full
# matrix (1M+3 counts too) on 3 ranks. A variant this build lacks, or whose
# transport does not open here, is a SKIP that says why (hcomm-topo
# --transports). Under `make check` the current directory is the top build
# directory; by hand run it from there. FABRIC_VARIANTS="ucx-tcp" runs one.
# shellcheck source=tests/test_lib.sh
. "$(dirname "$0")/../test_lib.sh"
run="$top/tools/hcomm-run" check="$top/tests/coll/coll_check"
need "$run" "$check" "$top/tools/hcomm-topo"
export HCOMM_TIMEOUT=60
unset HCOMM_TRANSPORT HCOMM_NET
scratch fabric

# one VARIANT RANKS ARGS...: coll_check ARGS on RANKS ranks over VARIANT
one() {
    v=$1 n=$2
    shift 2
    # shellcheck disable=SC2046
    try 400 $(variant_env "$v") "$run" -n "$n" --timeout 360 "$check" "$@"
    result "$v, $n ranks: coll_check $*" $?
}

# chosen VARIANT: rank 0 of a 3-rank job logs the variant's transport for both peers
chosen() {
    v=$1 tl=${1%%-*}
    # shellcheck disable=SC2046
    try 120 $(variant_env "$v") HCOMM_LOG_LEVEL=info HCOMM_LOG_SUBSYS=init "$run" -n 3 \
        "$check" --quick --coll allreduce --dtype float32 --no-extras
    rc=$?
    grep ':0 hcomm INFO init' "$out" > "$out.r0"
    [ $rc -eq 0 ] && [ "$(peers_over "$out.r0" "$tl")" = 2 ] || rc=1
    result "$v: rank 0 chose $tl for its 2 peers" $rc
}

for v in ${FABRIC_VARIANTS:-ofi-tcp ofi-shm ucx-tcp ucx-shm}; do
    why=$(tl_unusable "$v")
    if [ -n "$why" ]; then
        result "$v: $why" 77
        continue
    fi
    chosen "$v"
    for n in 2 3 4 5; do
        one "$v" $n --quick
    done
    one "$v" 3
done
finish
