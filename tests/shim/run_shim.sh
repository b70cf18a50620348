#!/bin/sh
# run_shim.sh - runs the NCCL shim checks from already-built binaries:
# nccl_unit (the shim's own logic on one rank, in one process);
# nccl_check (and nccl_check_nv, built against NVIDIA's nccl.h, and
# nccl_check_cuda, linked to CUDA for calls on CUDA streams) under hcomm-run
# on 1, 2 and 3 ranks, and with a rank that dies (shrunk away); with an NCCL
# profiler plugin (tests/shim/prof_plugin.c); the ABI diff of nccl_abi_check_hc / nccl_abi_check_nv;
# the symbol check of libnccl.so.2 against NVIDIA's header. Builds nothing.
#   SHIM_BIN   folder holding the test binaries (default tests/shim of the build)
#   SHIM_LIB   folder holding libnccl.so.2 (default .libs of the build)
#   HCOMM_RUN  hcomm-run (default tools/hcomm-run)
#   HCOMM_LIBDIR folder of libhcomm.so (default .libs)
# Exit: 0 PASS, 1 FAIL, 77 SKIP (binaries missing).
# shellcheck source=tests/test_lib.sh
. "$(dirname "$0")/../test_lib.sh"
bin=${SHIM_BIN:-$top/tests/shim}
lib=${SHIM_LIB:-$top/.libs}
run=${HCOMM_RUN:-$top/tools/hcomm-run}
libdir=${HCOMM_LIBDIR:-$top/.libs}
nvh=${NCCL_H:-/usr/local/cuda/include/nccl.h}
need "$bin/nccl_check" "$bin/nccl_unit" "$bin/nccl_abi_check_hc" "$lib/libnccl.so.2" "$run"
LD_LIBRARY_PATH="$lib:$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
HCOMM_LOG_LEVEL=${HCOMM_LOG_LEVEL:-none}
export LD_LIBRARY_PATH HCOMM_LOG_LEVEL
scratch shim
try 120 TMPDIR="$tmp" "$bin/nccl_unit"
result "nccl_unit: registrations, PreMulSum on device memory and wide integers, group errors, destroyed handles, a failed destroy, NCCL_* values" $?
progs=nccl_check
[ -x "$bin/nccl_check_nv" ] && progs="$progs nccl_check_nv"
[ -x "$bin/nccl_check_cuda" ] && progs="$progs nccl_check_cuda"
for prog in $progs; do
    for n in 1 2 3; do
        NCCL_CHECK_ID_FILE="$tmp/id.$prog.$n" "$run" -n "$n" -t 120 "$bin/$prog" > "$out" 2>&1
        result "$prog on $n ranks" $?
        # what could not run here (nccl_check_cuda without a GPU) says so
        grep -m1 '^SKIP' "$out" | sed "s/^/  $prog: /"
    done
done
# the last of 3 ranks exits after init; the others shrink it away and go on
for tl in shm tcp; do
    NCCL_CHECK_DEAD_RANK=1 HCOMM_TRANSPORT=$tl NCCL_CHECK_ID_FILE="$tmp/id.dead.$tl" \
        "$run" -n 3 -t 120 "$bin/nccl_check" > "$out" 2>&1 &&
        [ "$(grep -c ': PASS (0 failures)' "$out")" -eq 2 ]
    result "shrink after a rank died ($tl)" $?
done
# NCCL profiler plugins: the test plugin by path and by NAME
# (libnccl-profiler-NAME.so on the library path) sees consistent events,
# all stopped, collectives and P2P among them; none, or one that is not
# there, leaves the program running without
plug=$bin/.libs/libnccl-profiler-test.so
if [ -f "$plug" ]; then
    for how in "$plug" test; do
        LD_LIBRARY_PATH="$bin/.libs:$LD_LIBRARY_PATH" NCCL_PROFILER_PLUGIN=$how \
            NCCL_CHECK_ID_FILE="$tmp/id.prof.$(basename "$how")" \
            "$run" -n 2 -t 120 "$bin/nccl_check" > "$out" 2>&1 &&
            awk '/^prof_plugin rank/ { n++; coll += $15; p2p += $17; if ($19 || $21) bad++ }
                 END { exit !(n >= 2 && coll > 0 && p2p > 0 && !bad) }' "$out"
        result "profiler plugin loaded as $(basename "$how"): every event consistent and stopped" $?
    done
    for how in none /nonexistent/libnccl-profiler-x.so; do
        NCCL_PROFILER_PLUGIN=$how NCCL_CHECK_ID_FILE="$tmp/id.noprof.$(basename "$how")" \
            "$run" -n 2 -t 120 "$bin/nccl_check" > "$out" 2>&1 && ! has '^prof_plugin'
        result "NCCL_PROFILER_PLUGIN=$how: runs without a plugin" $?
    done
else
    result "profiler plugin (tests/shim/libnccl-profiler-test.so not built)" 77
fi
# ncclCommInitRankScalable with an id from each rank uses rank 0's: the other
# ranks' roots end unused, without an error past HCOMM_TIMEOUT (3 s; idle 5 s)
HCOMM_LOG_LEVEL=info HCOMM_TIMEOUT=3 NCCL_CHECK_SCALABLE=5 NCCL_CHECK_ID_FILE="$tmp/id.scal" \
    "$run" -n 3 -t 60 "$bin/nccl_check" > "$out" 2>&1 &&
    [ "$(grep -c ': scalable PASS' "$out")" -eq 3 ] && ! has 'ERROR' && ! has 'no rank joined'
result "ncclCommInitRankScalable: unused ids' roots end quietly" $?
if [ -x "$bin/nccl_abi_check_nv" ]; then
    { "$bin/nccl_abi_check_hc" > "$tmp/hc" && "$bin/nccl_abi_check_nv" > "$tmp/nv" &&
        [ -s "$tmp/hc" ] && diff "$tmp/nv" "$tmp/hc"; } > "$out" 2>&1
    result "ABI matches NVIDIA's nccl.h (diff: < NVIDIA, > hcomm)" $?
else
    result "ABI diff (nccl_abi_check_nv not built: no NVIDIA nccl.h)" 77
fi
if [ -f "$nvh" ] && command -v nm >/dev/null 2>&1; then
    grep -o '^[a-z ]*\(const \)\?[a-zA-Z_]*\*\? *p\?nccl[A-Za-z]*(' "$nvh" |
        sed 's/.*[ *]\(p\?nccl[A-Za-z]*\)($/\1/' | sort -u > "$tmp/want"
    nm -D --defined-only "$lib/libnccl.so.2" | awk '{print $3}' | sort -u > "$tmp/have"
    comm -23 "$tmp/want" "$tmp/have" > "$out"   # what libnccl.so.2 lacks
    [ -s "$tmp/want" ] && [ ! -s "$out" ]
    st=$?
    result "libnccl.so.2 exports all $(wc -l < "$tmp/want") functions of $nvh" $st
else
    result "symbol check (no $nvh or nm)" 77
fi
finish
