"""torch_extra.py - the hcomm backend beyond dtype by dtype (torch_ops.py
calls run): async work, a subgroup, non-contiguous tensors, the errors it
must raise. gloo gives every reference."""
import os

import torch
import torch.distributed as dist

RANK, N = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])


def exception_of(work):
    work.wait()
    try:
        return repr(work.exception())
    except TypeError as e:
        return type(e).__name__


def run_async(hc, gl, check, timeout):
    ts = [torch.full((1000,), float(RANK + i)) for i in range(4)]
    works = [dist.all_reduce(t, group=hc, async_op=True) for t in ts]
    # then() runs on completion, with the Future's list of output tensors
    doubled = works[0].get_future().then(lambda f: f.value()[0] * 2)
    # compute that overlaps the operations in flight
    torch.mm(torch.ones(200, 200), torch.ones(200, 200))
    for w in works:
        check("async wait returns True", torch.tensor(w.wait(timeout)), torch.tensor(True))
        check("async is_completed after wait", torch.tensor(w.is_completed()), torch.tensor(True))
    for i, t in enumerate(ts):
        want = torch.full((1000,), float(RANK + i))
        dist.all_reduce(want, group=gl)
        check("async allreduce %d" % i, t, want)
    check("get_future().then", doubled.wait(), ts[0] * 2)
    check("get_future().value() is the output", works[1].get_future().value()[0], ts[1])
    # torch 1.13's binding of Work.exception() cannot convert its result for
    # any backend: it must behave on hcomm as on gloo
    seen = [exception_of(dist.all_reduce(torch.ones(2), group=g, async_op=True)) for g in (gl, hc)]
    check("Work.exception() as gloo's: %s" % seen, torch.tensor(seen[1] == seen[0]), torch.tensor(True))
    w = dist.barrier(group=hc, async_op=True)
    w.wait(timeout)
    check("async barrier completes", torch.tensor(w.is_completed()), torch.tensor(True))
    run_nested(hc, gl, check)


def run_nested(hc, gl, check):
    # A then() callback that waits for an operation of its own group, as
    # PowerSGD's hook does. A 4 MiB allreduce is still running when then() is
    # called, so the callback runs on the thread of the group's stream: the
    # operation it waits for must not queue behind it there.
    def nested(fut):
        inner = fut.value()[0][:4].clone()
        dist.all_reduce(inner, group=hc)
        return inner

    big = torch.full((1 << 20,), float(RANK))
    got = dist.all_reduce(big, group=hc, async_op=True).get_future().then(nested).wait()
    want = torch.full((4,), float(sum(range(N)) * N))
    check("then() callback waiting for its own group's allreduce", got, want)


def run_subgroup(check, timeout):
    # every rank calls new_group; only members get a group (and a communicator)
    members = [0, N - 1] if N > 2 else list(range(N))
    hsub = dist.new_group(members, backend="hcomm", timeout=timeout)
    gsub = dist.new_group(members, backend="gloo", timeout=timeout)
    if RANK not in members:
        check("non-member gets no group", torch.tensor(hsub == dist.GroupMember.NON_GROUP_MEMBER),
              torch.tensor(True))
        return
    got, want = torch.arange(5.0) + RANK, torch.arange(5.0) + RANK
    dist.all_reduce(got, group=hsub)
    dist.all_reduce(want, group=gsub)
    check("new_group(%s) allreduce" % members, got, want)
    outs = [torch.empty(3, dtype=torch.int64) for _ in members]
    dist.all_gather(outs, torch.full((3,), RANK), group=hsub)
    want = torch.tensor(members)[:, None].expand(-1, 3)
    check("new_group(%s) allgather" % members, torch.stack(outs), want)


def on_copy(view, fn):
    c = view.contiguous()
    fn(c)
    view.copy_(c)


def run_noncontiguous(hc, gl, check):
    base = torch.arange(60, dtype=torch.float32).view(6, 10) + RANK
    for name, view in (("strided", lambda t: t[:, ::2]), ("transposed", lambda t: t.t())):
        # gloo 1.13 runs a strided view as if it were contiguous memory: its
        # reference runs on a contiguous copy, written back through the view
        got, want = base.clone(), base.clone()
        dist.all_reduce(view(got), group=hc)
        on_copy(view(want), lambda c: dist.all_reduce(c, group=gl))
        check("allreduce %s view" % name, got, want)
        got, want = base.clone(), base.clone()
        dist.broadcast(view(got), N - 1, group=hc)
        on_copy(view(want), lambda c: dist.broadcast(c, N - 1, group=gl))
        check("broadcast %s view" % name, got, want)
        # a non-contiguous input and non-contiguous outputs
        outs = [torch.zeros(6, 5).t() for _ in range(N)]
        refs = [torch.zeros(6, 5).t() for _ in range(N)]
        dist.all_gather(outs, base.t()[::2], group=hc)
        dist.all_gather(refs, base.t()[::2].contiguous(), group=gl)
    check("allgather non-contiguous in and out", outs, refs)


def says(check, label, msg, words):
    """The error message names the problem."""
    check("%s: %r" % (label, msg), torch.tensor(words in msg), torch.tensor(True))


def run_errors(hc, check, refuses, skip):
    t = torch.ones(4)
    msg = refuses("recv from any source", lambda: dist.recv(t, group=hc))
    says(check, "any-source error", msg, "any source")
    refuses("a tag other than 0", lambda: dist.send(t, (RANK + 1) % N, group=hc, tag=3))
    refuses("bitwise reduction on float", lambda: dist.all_reduce(t, dist.ReduceOp.BXOR, group=hc))
    refuses("int16 reduction", lambda: dist.all_reduce(t.short(), group=hc))
    refuses("broadcast from a rank outside the group", lambda: dist.broadcast(t, N + 3, group=hc))
    try:
        cuda = torch.ones(4, device="cuda")
    except (RuntimeError, AssertionError) as e:
        skip("CUDA tensor refusal", "torch cannot create a CUDA tensor here (%s)" % e)
        return
    msg = refuses("CUDA tensor", lambda: dist.all_reduce(cuda, group=hc))
    says(check, "CUDA error", msg, "device memory is not supported yet")


def run_exchange(check, timeout):
    # isend to the right, irecv from the left, on every rank, then wait: 4
    # MiB, more than a transport buffers, so each send ends only once the
    # receive issued after it on the peer runs (gloo runs them together)
    if N < 2:
        return
    # a group of its own: these are its first operations
    hc = dist.new_group(list(range(N)), backend="hcomm", timeout=timeout)
    out = torch.full((1 << 20,), float(RANK))
    got = torch.empty(1 << 20)
    works = [dist.isend(out, (RANK + 1) % N, group=hc), dist.irecv(got, (RANK - 1) % N, group=hc)]
    for w in works:
        w.wait(timeout)
    check("isend right, irecv left, 4 MiB", got, torch.full((1 << 20,), float((RANK - 1) % N)))


def run_exchange_strided(check, timeout):
    # the same with a non-contiguous send (every other column of a matrix),
    # issued first and issued after the receive; hcomm copies it at issue
    if N < 2:
        return
    hc = dist.new_group(list(range(N)), backend="hcomm", timeout=timeout)
    right, left = (RANK + 1) % N, (RANK - 1) % N
    mat = torch.arange(2048 * 1024, dtype=torch.float32).view(2048, 1024) + RANK
    want = (torch.arange(2048 * 1024, dtype=torch.float32).view(2048, 1024) + left)[:, ::2]
    for recv_first in (False, True):
        got = torch.empty(2048, 512)
        send = lambda: dist.isend(mat[:, ::2], right, group=hc)
        recv = lambda: dist.irecv(got, left, group=hc)
        works = [recv(), send()] if recv_first else [send(), recv()]
        for w in works:
            w.wait(timeout)
        check("strided isend right, irecv left, 4 MiB, %s first" % ("irecv" if recv_first else "isend"),
              got, want)
    # a send of what a receive still outstanding writes waits for it: rank 0
    # forwards to rank 1 the transpose of what rank 1 sends it
    if RANK <= 1:
        buf = torch.empty(1024, 1024)
        if RANK == 0:
            first = dist.irecv(buf, 1, group=hc)
            second = dist.isend(buf.t(), 1, group=hc)
        else:
            src = torch.arange(1024 * 1024, dtype=torch.float32).view(1024, 1024)
            first = dist.isend(src, 0, group=hc)
            second = dist.irecv(buf, 0, group=hc)
        first.wait(timeout)
        second.wait(timeout)
        if RANK == 1:
            check("a strided send of a tensor a receive writes, after it", buf, src.t())


def run_disagreeing_compression(check, timeout):
    # compression states that disagree (rank 0: 1000 elements, topk 10 of
    # them; the others: 2000, topk 10): rank 0 decodes indexes out of range in
    # the host step after the last collective. Its Work must fail rather than
    # hand back a wrong average. A group of its own: it is failed afterwards.
    if N < 2:
        return
    hc = dist.new_group(list(range(N)), backend="hcomm", timeout=timeout)
    n, ratio = (1000, 0.01) if RANK == 0 else (2000, 0.005)
    work = hc._allreduce_compressed(torch.arange(float(n)), "topk:%r" % ratio, -1, 0)
    try:
        work.wait(timeout)
        msg = ""
    except RuntimeError as e:
        msg = str(e)
    if RANK == 0:
        check("a compressed allreduce whose decode fails raises: %r" % msg,
              torch.tensor("PROTOCOL" in msg or "protocol" in msg), torch.tensor(True))


def run(hc, gl, check, refuses, skip, timeout):
    run_exchange(check, timeout)
    run_exchange_strided(check, timeout)
    run_async(hc, gl, check, timeout)
    run_noncontiguous(hc, gl, check)
    run_errors(hc, check, refuses, skip)
    run_subgroup(check, timeout)
    run_disagreeing_compression(check, timeout)
