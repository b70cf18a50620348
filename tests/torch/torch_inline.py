"""torch_inline.py - small operations run on the caller's thread (the
backend's pg_inline.cpp) without deadlock and in order.

usage: torch_inline.py NRANKS [SECONDS]   (the launcher; exit 0: every rank passed)

Each rank (this file again, with RANK set):
1. opposite orders: two hcomm groups over the same ranks; even ranks issue an
   async allreduce on A then on B, odd ranks on B then A. Each rank's first
   operation cannot finish while it spins (its peer spins on the other group),
   so at least one is handed to its stream each round: a backend that waited
   for it on the caller's thread would hang here (the launcher's limit fails it).
2. order: on one group, small (inline) and large (queued) operations of
   distinct sizes and values, with rank 0 late now and then so that the
   others' inline operations run out of time and are handed over; every
   result must be the sum of the right operation. Two allreduces of one
   strided view without a wait between: the second must read the first's
   result, copied back through the view.
3. a completed Work: an inline operation's Work is complete when it returns,
   and its Future holds the output (value(), then()).
4. the benchmark's blocking C calls on the group's communicator
   (_time_c_allreduce): a time, a refusal of no calls, and right sums after.
Checks 1 and 2 also require that operations did run inline and were handed
over (_inline_counts, summed over the ranks): otherwise they tested nothing.
"""
import datetime
import os
import signal
import socket
import subprocess
import sys
import time

ROUNDS = 40
BIG = 1 << 18  # floats: 1 MiB, above TORCH_HCOMM_INLINE_BYTES' default (64 KiB)


def rank_main():
    import torch
    import torch.distributed as dist
    import hcomm_torch  # noqa: F401

    rank, n = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    timeout = datetime.timedelta(seconds=60)
    dist.init_process_group("hcomm", init_method=os.environ["HC_INLINE_INIT"], rank=rank,
                            world_size=n, timeout=timeout)
    gloo = dist.new_group(backend="gloo", timeout=timeout)
    ga, gb = dist.new_group(backend="hcomm"), dist.new_group(backend="hcomm")
    hc = dist.group.WORLD
    failed = []

    def check(label, ok, detail=""):
        if not ok:
            failed.append(label)
            print("rank %d: FAIL %s %s" % (rank, label, detail), flush=True)

    def total(x):
        """x summed over the ranks (through gloo)."""
        t = torch.tensor([float(x)], dtype=torch.float64)
        dist.all_reduce(t, group=gloo)
        return int(t.item())

    def counts(groups):
        return [sum(g._inline_counts()[k] for g in groups) for k in (0, 1)]

    ranks_sum = n * (n - 1) / 2  # sum of the ranks
    # 1. opposite orders on two groups
    for g in (ga, gb):  # the first operation of a group goes to its stream
        dist.all_reduce(torch.zeros(2), group=g)
    c0 = counts((ga, gb))
    for i in range(ROUNDS):
        dist.barrier(group=gloo)  # a round starts with both groups' streams idle
        ta, tb = torch.full((2,), float(rank + i)), torch.full((3,), float(10 * rank + i))
        order = [(ga, ta), (gb, tb)] if rank % 2 == 0 else [(gb, tb), (ga, ta)]
        works = [dist.all_reduce(t, group=g, async_op=True) for g, t in order]
        for w in works:
            w.wait(timeout)
        check("opposite orders round %d: A" % i, torch.equal(ta, torch.full((2,), ranks_sum + n * i)),
              str(ta))
        check("opposite orders round %d: B" % i,
              torch.equal(tb, torch.full((3,), 10 * ranks_sum + n * i)), str(tb))
    c1 = counts((ga, gb))
    inl, over = total(c1[0] - c0[0]), total(c1[1] - c0[1])
    if rank == 0:
        print("opposite orders: %d rounds, %d operations inline, %d handed over (all ranks)"
              % (ROUNDS, inl, over), flush=True)
    if n > 1:
        check("opposite orders handed operations over", over >= 1, "(%d)" % over)

    # 2. order within a group: small inline, large queued, late peers
    def val(i, k, r):
        return float(1000 * k + 10 * i + r)

    def want(i, k):
        return float(n * (1000 * k + 10 * i)) + ranks_sum

    dist.all_reduce(torch.zeros(2), group=hc)
    c0 = counts((hc,))
    for i in range(ROUNDS):
        if rank == 0 and i % 3 == 1:
            time.sleep(0.003)  # the others' inline spins (50 us; 1 ms on 4 ranks here) run out
        s1 = torch.full((4,), val(i, 1, rank))
        big = torch.full((BIG,), val(i, 2, rank))
        s2 = torch.full((3,), val(i, 3, rank))
        bc = torch.full((5,), val(i, 4, rank))
        works = [dist.all_reduce(s1, group=hc, async_op=True),
                 dist.all_reduce(big, group=hc, async_op=True),
                 dist.all_reduce(s2, group=hc, async_op=True),
                 dist.broadcast(bc, i % n, group=hc, async_op=True)]
        for w in works:
            w.wait(timeout)
        # twice on one strided view, not waiting between: the second's input
        # copy must see the first's result (its copy back through the view)
        base = torch.full((4, 6), val(i, 6, rank))
        view = base[:, ::2]
        twice = [dist.all_reduce(view, group=hc, async_op=True) for _ in range(2)]
        for w in twice:
            w.wait(timeout)
        check("order round %d: twice on a strided view" % i,
              torch.equal(base[:, ::2], torch.full((4, 3), n * want(i, 6))) and
              torch.equal(base[:, 1::2], torch.full((4, 3), val(i, 6, rank))), str(base))
        s3 = torch.full((2,), val(i, 5, rank))
        dist.all_reduce(s3, group=hc)
        for name, t, k in (("s1", s1, 1), ("big", big, 2), ("s2", s2, 3), ("s3", s3, 5)):
            check("order round %d: %s" % (i, name), torch.equal(t, torch.full_like(t, want(i, k))),
                  str(t[:4]))
        check("order round %d: broadcast" % i,
              torch.equal(bc, torch.full((5,), val(i, 4, i % n))), str(bc))
        check("order round %d: s1's future" % i,
              torch.equal(works[0].get_future().value()[0], s1))
    c1 = counts((hc,))
    inl, over = total(c1[0] - c0[0]), total(c1[1] - c0[1])
    if rank == 0:
        print("order: %d rounds, %d operations inline, %d handed over (all ranks)"
              % (ROUNDS, inl, over), flush=True)
    check("order: operations ran inline", inl >= 1, "(%d)" % inl)
    if n > 1:
        check("order: operations were handed over", over >= 1, "(%d)" % over)

    # 3. an inline operation's Work and Future (one-rank groups: nothing to wait for)
    solo = None
    for r in range(n):
        g = dist.new_group([r], backend="hcomm")
        if r == rank:
            solo = g
    dist.all_reduce(torch.zeros(2), group=solo)  # to the stream: later ones may run inline
    for _ in range(100):  # the stream's thread may not have ended the first one's completion yet
        t = torch.full((4,), 3.0)
        before = solo._inline_counts()[0]
        w = dist.all_reduce(t, group=solo, async_op=True)
        if solo._inline_counts()[0] == before + 1:
            break
        w.wait(timeout)
        time.sleep(0.001)
    check("a one-rank operation ran inline", solo._inline_counts()[0] == before + 1,
          "(counts %s)" % (solo._inline_counts(),))
    check("an inline Work is complete at once", w.is_completed())
    fut = w.get_future()
    check("its Future is done", fut.done())
    check("its Future holds the output", fut.value()[0] is not None and torch.equal(fut.value()[0], t))
    doubled = fut.then(lambda f: f.value()[0] * 2).wait()
    check("then() on it", torch.equal(doubled, t * 2))
    check("wait() returns True", w.wait(timeout))

    # 4. the benchmark's C timing (perf/torch_bench.py) on the group's
    # communicator, between torch calls that still give the right sums
    try:
        hc._time_c_allreduce(0)
        check("a C timing of no calls is refused", False)
    except RuntimeError as e:
        check("a C timing of no calls is refused, naming n", "n > 0" in str(e), str(e))
    dist.barrier(group=gloo)
    sec = hc._time_c_allreduce(200)
    check("a C timing gives a time", 0 < sec < 1, str(sec))
    t = torch.full((3,), float(rank + 1))
    dist.all_reduce(t, group=hc)
    check("an allreduce after the C timing", torch.equal(t, torch.full((3,), n * (n + 1) / 2.0)),
          str(t))

    dist.barrier(group=gloo)
    dist.destroy_process_group()
    # one write: ranks share the output, and a line split in two runs into another's
    sys.stdout.write("rank %d: %s (%d failed)\n" % (rank, "PASS" if not failed else "FAIL", len(failed)))
    sys.stdout.flush()
    return 1 if failed else 0


def launch(n, limit):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, WORLD_SIZE=str(n), HC_INLINE_INIT="tcp://127.0.0.1:%d" % port)
    procs = [subprocess.Popen([sys.executable, "-W", "ignore::UserWarning", __file__],
                              env=dict(env, RANK=str(r)), start_new_session=True)
             for r in range(n)]
    deadline = time.monotonic() + limit
    while any(p.poll() is None for p in procs) and time.monotonic() < deadline:
        time.sleep(0.1)
    for r, p in enumerate(procs):
        if p.poll() is None:
            print("rank %d still running after %.0f s (a deadlock?): killed" % (r, limit),
                  flush=True)
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    codes = [p.returncode for p in procs]
    ok = all(c == 0 for c in codes)
    print("%d ranks: exit codes %s: %s" % (n, codes, "PASS" if ok else "FAIL"), flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    if "RANK" in os.environ and "HC_INLINE_INIT" in os.environ:
        sys.exit(rank_main())
    sys.exit(launch(int(sys.argv[1]), float(sys.argv[2]) if len(sys.argv) > 2 else 120.0))
