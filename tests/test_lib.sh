# test_lib.sh - sourced by every shell test driver (tests/*/run_*.sh,
# tests/fault/kill_peer.sh) as . "$(dirname "$0")/../test_lib.sh": where the
# build is, SKIP unless what a test needs is there, a scratch folder, a
# command under a timeout, PASS/FAIL/SKIP counting and the verdict in
# automake's terms: exit 0 PASS, 1 FAIL, 77 SKIP (99: the driver itself broke).

# top: the build tree. make check runs the drivers from it (automake exports no
# top_builddir; set it to run one from elsewhere); a driver run by hand from
# another folder falls back to the tree it sits in (an in-tree build).
top=${top_builddir:-.}
if [ ! -f "$top/config.status" ] && [ -f "$(dirname "$0")/../../config.status" ]; then
    top=$(cd "$(dirname "$0")/../.." && pwd)
fi

# at_exit CMD: runs the command line CMD when the script ends, also on HUP, INT
# or TERM; the last registered runs first.
at_exit_cmds=:
trap 'eval "$at_exit_cmds"' EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM
at_exit() { at_exit_cmds="$1; $at_exit_cmds"; }

# skip REASON...: the whole test is a SKIP: prints why and exits 77.
skip() {
    echo "SKIP: $*"
    exit 77
}

# need BIN...: SKIP unless every BIN is built (an executable file).
need() {
    for b in "$@"; do
        [ -x "$b" ] || skip "$b not built"
    done
}

# need_root WHAT: SKIP unless root (WHAT needs it).
need_root() {
    [ "$(id -u)" = 0 ] || skip "needs root for $1"
}

# need_mpi: SKIP unless this build has MPI and its mpirun is there; then
# $mpirun is that mpirun, allowed to run as root. make check passes
# HC_TEST_MPIRUN (Makefile.am): configure's mpirun when the MPI parts are
# built, else empty. A driver run by hand without it SKIPs: run it through
# make check, or set HC_TEST_MPIRUN=mpirun (a name or a path) yourself.
need_mpi() {
    [ -n "${HC_TEST_MPIRUN+set}" ] ||
        skip "HC_TEST_MPIRUN unset: run through make check (or set it to an mpirun)"
    [ -n "$HC_TEST_MPIRUN" ] || skip "built without MPI (configure found none)"
    mpirun=$(command -v "$HC_TEST_MPIRUN") || skip "no mpirun ($HC_TEST_MPIRUN not found)"
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
}

# scratch NAME: $tmp, a temporary folder, and $out, a file in it (write
# "$out".* or "$tmp"/* beside it); they go when the script ends.
scratch() {
    tmp=$(mktemp -d "${TMPDIR:-/tmp}/hcomm-$1.XXXXXX") || exit 99
    at_exit "rm -rf '$tmp'"
    out=$tmp/out
    : > "$out"
}

# try SECS [VAR=VALUE...] CMD [ARGS...]: runs CMD (with those variables set)
# under timeout(1), SECS seconds; its output into $out; its exit status.
try() {
    secs=$1
    shift
    timeout "$secs" env "$@" > "$out" 2>&1
}

# has PATTERN [FILE]: FILE (default $out) has a line matching PATTERN (grep).
has() {
    grep -q -e "$1" "${2:-$out}"
}

# perf_ok: hcomm-perf's own result check in $out passed.
perf_ok() {
    has 'Out of bounds values : 0 OK'
}

# peers_over LOG TL: how many peers a rank's info log says it reaches over
# transport TL (lines "ranks 0-3,5 on HOST: TL" from comm_transports.c).
peers_over() {
    sed -n "s/.* ranks\{0,1\} \([0-9,-]*\) on .*: $2\$/\1/p" "$1" | tr ',' '\n' |
        awk -F- '$0 != "" { n += NF == 2 ? $2 - $1 + 1 : 1 } END { print n + 0 }'
}

# variant_env VARIANT: the environment that forces a transport variant, one
# assignment a word: shm, tcp (hcomm's own), ofi-tcp (libfabric tcp;ofi_rxm),
# ofi-shm (libfabric shm), ucx-tcp (UCX_TLS=tcp), ucx-shm (UCX_TLS=posix,cma:
# UCX's shared memory and cross-memory copies).
variant_env() {
    case $1 in
    tcp | shm) echo "HCOMM_TRANSPORT=$1" ;;
    ofi-tcp) echo "HCOMM_TRANSPORT=ofi HCOMM_OFI_PROVIDER=tcp;ofi_rxm" ;;
    ofi-shm) echo "HCOMM_TRANSPORT=ofi HCOMM_OFI_PROVIDER=shm" ;;
    ucx-tcp) echo "HCOMM_TRANSPORT=ucx UCX_TLS=tcp" ;;
    ucx-shm) echo "HCOMM_TRANSPORT=ucx UCX_TLS=posix,cma" ;;
    *) echo "unknown transport variant $1" >&2; return 1 ;;
    esac
}

# tl_unusable VARIANT: prints nothing when the variant's transport opens here
# (hcomm-topo --transports under its environment), else why it cannot run.
tl_unusable() {
    tl=${1%%-*}
    # shellcheck disable=SC2046 # the variant's assignments, one word each
    tls=$(env $(variant_env "$1") "$top/tools/hcomm-topo" --transports 2>&1)
    if echo "$tls" | grep -q "^transport $tl  *opens here"; then
        return 0
    elif echo "$tls" | grep -q "^transport $tl "; then
        echo "$tls" | sed -n "s/^transport $tl  *//p"
    else
        echo "this build has no $tl transport (configure --with-$tl)"
    fi
}

# result LABEL STATUS [FILE]: counts one check by its exit status: 0 PASS, 77
# SKIP, else FAIL, which shows what on_fail makes of FILE (default $out).
pass=0 fail=0 skipped=0
result() {
    case $2 in
    0) pass=$((pass + 1)); echo "PASS $1" ;;
    77) skipped=$((skipped + 1)); echo "SKIP $1" ;;
    *) fail=$((fail + 1)); echo "FAIL $1"; on_fail "${3:-$out}" ;;
    esac
}

# on_fail FILE: a failed check's output: its last lines without the PASS
# lines, error logs included (a CI failure of run_launchers.sh was unreadable
# without them). A driver may define its own.
on_fail() {
    [ -f "$1" ] || return 0
    grep -v -e '^PASS' "$1" | tail -n 30
}

# finish: the totals, and the verdict: 1 if a check failed, else 77 if none
# passed and one was skipped, else 0.
finish() {
    totals="$pass passed, $fail failed"
    [ "$skipped" -eq 0 ] || totals="$totals, $skipped skipped"
    echo "$totals"
    [ "$fail" -eq 0 ] || exit 1
    [ "$pass" -gt 0 ] || [ "$skipped" -eq 0 ] || exit 77
    exit 0
}
