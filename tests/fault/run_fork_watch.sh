#!/bin/sh
# run_fork_watch.sh - a process that holds a communicator forks two children,
# which make one of their own; a revoke by one must end the other's blocked
# allreduce within 4 s: a child starts its own watch thread, and the parent's
# communicators are not its (tests/fault/fork_watch.c). Then the same without
# the parent's communicator, as the reference.
# shellcheck source=tests/test_lib.sh
. "$(dirname "$0")/../test_lib.sh"
prog="$top/tests/fault/fork_watch"
need "$prog"
scratch fork_watch
# threads in a child forked from a threaded process, which is the case here:
# ThreadSanitizer refuses them unless told to go on
export TSAN_OPTIONS="${TSAN_OPTIONS:+$TSAN_OPTIONS:}die_after_fork=0"
try 60 "$prog" && has '^child B: allreduce: .*revoked'
result "children forked from a process with a communicator: a revoke reaches them" $?
try 60 "$prog" nofirst && has '^child B: allreduce: .*revoked'
result "children of a process without one: a revoke reaches them" $?
finish
