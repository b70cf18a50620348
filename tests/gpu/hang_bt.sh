#!/bin/sh
# hang_bt.sh SECONDS CMD... - runs CMD; if it is still running after SECONDS,
# prints every thread's backtrace (cuda-gdb on a GPU machine, where gdb is
# not installed; gdb elsewhere) and kills it. For the one short run a lent GPU
# machine allows: a hang then comes back with where it hangs. Exit: CMD's
# status, or 124 when it was killed.
t=${1:?usage: $0 SECONDS CMD...}
shift
"$@" &
pid=$!
i=0
while kill -0 "$pid" 2>/dev/null && [ "$i" -lt $((t * 2)) ]; do
    sleep 0.5
    i=$((i + 1))
done
if ! kill -0 "$pid" 2>/dev/null; then
    wait "$pid"
    exit $?
fi
echo "hang_bt: $1 still running after $t s: backtraces" >&2
dbg=$(command -v cuda-gdb || command -v gdb)
if [ -n "$dbg" ]; then
    timeout 60 "$dbg" -p "$pid" -batch -ex "set pagination off" -ex "thread apply all bt" 2>&1 |
        grep -E '^Thread|^#[0-9]+ ' >&2
else
    echo "hang_bt: no cuda-gdb or gdb here" >&2
fi
kill -9 "$pid" 2>/dev/null
wait "$pid" 2>/dev/null
exit 124
