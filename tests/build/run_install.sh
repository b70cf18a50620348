#!/bin/sh
# run_install.sh - make install, into a scratch DESTDIR: libhcomm, its headers
# and hcomm.pc where every library goes, and the NCCL drop-in in a directory of
# its own, never on the linker's default path, where it would replace NVIDIA's
# NCCL for every program on the machine; hcomm-run --nccl points there. Then
# the README's example as a new user builds it (pkg-config on the install) and
# runs it (mpirun -np 3, nothing set by hand).
# shellcheck source=tests/test_lib.sh
. "$(dirname "$0")/../test_lib.sh"
run="$top/tools/hcomm-run"
need "$run"
[ -f "$top/hcomm.pc" ] || skip "$top/hcomm.pc not made (run configure)"
command -v make > /dev/null || skip "no make"
command -v pkg-config > /dev/null || skip "no pkg-config"
scratch install
dest=$tmp/root

try 300 make -C "$top" -s install DESTDIR="$dest"
result "make install DESTDIR=..." $?
pcdir=$(dirname "$(find "$dest" -name hcomm.pc | head -1)")
var() { PKG_CONFIG_PATH=$pcdir pkg-config --variable="$1" hcomm; }
libdir=$(var libdir) inc=$(var includedir) ncdir=$(var nccl_libdir)
echo "libdir $libdir, nccl_libdir $ncdir"

[ -n "$ncdir" ] && [ "$ncdir" != "$libdir" ] && [ -e "$dest$ncdir/libnccl.so.2" ] &&
    [ -e "$dest$ncdir/libnccl.so" ]
result "libnccl.so.2 in nccl_libdir ($ncdir), not libdir" $?
ls "$dest$libdir"/libnccl* > /dev/null 2>&1
[ $? -ne 0 ] && [ -e "$dest$libdir/libhcomm.so.1" ] && [ -e "$dest$libdir/pkgconfig/hcomm.pc" ]
result "libdir ($libdir) holds libhcomm and hcomm.pc, no libnccl" $?
[ -e "$dest$inc/hcomm.h" ] && [ -e "$dest$inc/hcomm_nccl.h" ] && [ -e "$dest$inc/hcomm/nccl.h" ]
result "headers in includedir ($inc)" $?

"$run" -n 1 --nccl sh -c 'echo "$LD_LIBRARY_PATH"' > "$out" 2>&1 && has "^$ncdir\(:\|$\)"
result "hcomm-run --nccl puts nccl_libdir first on LD_LIBRARY_PATH" $?

# hcomm-run binds the root's port and hands rank 0 the listening socket (a port
# chosen by bind-and-close could be taken first); no other rank inherits it
"$run" -n 3 sh -c 'n=$(ls -l /proc/$$/fd | grep -c socket:)
    echo "rank $HCOMM_RANK fd ${HCOMM_ROOT_FD:--} sockets $n"' > "$out" 2>&1 &&
    has '^rank 0 fd [0-9][0-9]* sockets 1$' && has '^rank 1 fd - sockets 0$' &&
    has '^rank 2 fd - sockets 0$'
result "hcomm-run hands the root's listening socket to rank 0 alone" $?

srcdir=$(cd "$(dirname "$0")/../.." && pwd)
prog=$tmp/init_env
# shellcheck disable=SC2046 # pkg-config's flags, one a word
${CC:-cc} "$srcdir/examples/init_env.c" -o "$prog" $(PKG_CONFIG_PATH=$dest$libdir/pkgconfig \
    PKG_CONFIG_SYSROOT_DIR=$dest pkg-config --cflags --libs hcomm) > "$out" 2>&1
result "the README's example builds with pkg-config --cflags --libs hcomm" $?
if [ -z "${HC_TEST_MPIRUN:-}" ] || ! mpirun=$(command -v "$HC_TEST_MPIRUN"); then
    result "the README's example under mpirun: HC_TEST_MPIRUN unset or not found" 77
else
    try 120 LD_LIBRARY_PATH="$dest$libdir" OMPI_ALLOW_RUN_AS_ROOT=1 \
        OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "$mpirun" --oversubscribe -np 3 "$prog" &&
        [ "$(grep -c 'allreduce ok' "$out")" -eq 3 ]
    result "the README's example runs under mpirun -np 3, nothing set by hand" $?
fi
finish
