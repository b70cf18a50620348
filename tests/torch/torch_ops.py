"""torch_ops.py - one rank of the hcomm backend's check (run by torch_launch.py).

The default group is "hcomm" (init method from HC_TEST_INIT); a "gloo" group
over the same ranks computes every reference. Every operation of torch 1.13's
ProcessGroup runs on every dtype on both, and the results must agree: exactly
for integers and bool, within the dtype's rounding for floats. Where gloo
refuses an operation, the reference comes from gloo operations that compute
the same thing (AVG = SUM / n, reduce_scatter = a block of an allreduce, ...);
where gloo refuses a dtype the case is skipped with a note. Then async work,
a subgroup, non-contiguous tensors and the errors the backend must raise.
"""
import datetime
import os
import sys

import torch
import torch.distributed as dist

import hcomm_torch  # noqa: F401  (registers "hcomm")

RANK, N = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
TIMEOUT = datetime.timedelta(seconds=60)
DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16,
          torch.int8, torch.uint8, torch.int32, torch.int64, torch.bool]
TOL = {torch.float32: 1e-5, torch.float64: 1e-12, torch.float16: 2e-2, torch.bfloat16: 5e-2}
OPS = {"sum": dist.ReduceOp.SUM, "product": dist.ReduceOp.PRODUCT,
       "min": dist.ReduceOp.MIN, "max": dist.ReduceOp.MAX}
stats = {"pass": 0, "fail": 0, "skip": 0}
notes = set()


def gen(rank, n, dtype, salt=0):
    """Rank's data: small values that float16 and bfloat16 hold exactly."""
    i = torch.arange(n, dtype=torch.int64) * 7 + rank * 3 + salt
    if dtype == torch.bool:
        return i % 3 == 0
    if dtype.is_floating_point:
        return ((i % 13).to(torch.float64) * 0.25 - 1.5).to(dtype)
    return ((i % 11) - (0 if dtype == torch.uint8 else 5)).to(dtype)


def same(a, b):
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if not a.dtype.is_floating_point:
        return torch.equal(a, b)
    tol = TOL[a.dtype]
    return torch.allclose(a.double(), b.double(), rtol=tol, atol=tol)


def check(label, got, want):
    gots, wants = (got, want) if isinstance(got, list) else ([got], [want])
    # a reference computed in another dtype (bfloat16's, averages) rounds to got's
    wants = [w.to(g.dtype) for g, w in zip(gots, wants)]
    if len(gots) == len(wants) and all(same(g, w) for g, w in zip(gots, wants)):
        stats["pass"] += 1
        return
    stats["fail"] += 1
    print("rank %d: FAIL %s:\n  hcomm %s\n  gloo  %s" % (RANK, label, gots, wants), flush=True)


def skip(label, why):
    stats["skip"] += 1
    key = "%s: %s" % (label, why.splitlines()[0][:100])
    if key not in notes and RANK == 0:
        print("note: skipped %s" % key, flush=True)
    notes.add(key)


def refuses(label, fn):
    """fn must raise RuntimeError (a local refusal, the same on every rank)."""
    try:
        fn()
    except RuntimeError as e:
        stats["pass"] += 1
        return str(e)
    stats["fail"] += 1
    print("rank %d: FAIL %s: no error raised" % (RANK, label), flush=True)
    return ""


def gloo(label, fn):
    """Runs fn on gloo; None (and a note) where gloo refuses it."""
    try:
        return fn()
    except RuntimeError as e:
        skip(label, "gloo refuses it (%s)" % e)
        return None


def run_reductions(dt, rd, hc, gl, n):
    """rd: the dtype gloo computes the reference in (bfloat16 has none in gloo)."""
    x = lambda salt=0, d=dt: gen(RANK, n, dt, salt).to(d)  # noqa: E731
    for name, op in OPS.items():
        want = x(d=rd)
        if gloo("allreduce %s %s" % (name, dt), lambda: dist.all_reduce(want, op, group=gl)) is None:
            continue
        got = x()
        dist.all_reduce(got, op, group=hc)
        check("allreduce %s %s n=%d" % (name, dt, n), got, want)
        got, want = [x(1), x(2)], [x(1, rd), x(2, rd)]
        dist.all_reduce_coalesced(want, op, group=gl)
        dist.all_reduce_coalesced(got, op, group=hc)
        check("allreduce_coalesced %s %s" % (name, dt), got, want)
        root = (n + 1) % N
        got, want = x(), x(d=rd)
        dist.reduce(want, root, op, group=gl)
        dist.reduce(got, root, op, group=hc)
        if RANK == root:
            check("reduce %s %s root %d" % (name, dt, root), got, want)
        # gloo 1.13 has no reduce_scatter: the reference is a block of an allreduce
        want = torch.cat([x(p, rd) for p in range(N)])
        dist.all_reduce(want, op, group=gl)
        want = want[RANK * n:(RANK + 1) * n]
        ins = [x(p) for p in range(N)]
        got = torch.empty(n, dtype=dt)
        dist.reduce_scatter(got, ins, op, group=hc)
        check("reduce_scatter %s %s" % (name, dt), got, want)
        got = torch.empty(n, dtype=dt)
        dist._reduce_scatter_base(got, torch.cat(ins), op, group=hc)
        check("_reduce_scatter_base %s %s" % (name, dt), got, want)
    run_avg_premul(dt, rd, hc, gl, n)


def run_avg_premul(dt, rd, hc, gl, n):
    """AVG and PREMUL_SUM: gloo has neither, so SUM gives the reference."""
    t = gen(RANK, n, dt)
    if dt == torch.bool:
        refuses("allreduce AVG bool", lambda: dist.all_reduce(t, dist.ReduceOp.AVG, group=hc))
        return
    want = gen(RANK, n, dt).to(rd)
    if gloo("allreduce sum %s" % dt, lambda: dist.all_reduce(want, group=gl)) is None:
        return
    if dt.is_floating_point:
        avg = want.double() / N
    else:  # hcomm's integer average truncates toward zero, as NCCL's
        avg = torch.div(want, N, rounding_mode="trunc")
    dist.all_reduce(t, dist.ReduceOp.AVG, group=hc)
    check("allreduce AVG %s" % dt, t, avg)
    premul = dist._make_nccl_premul_sum(2.5)
    t = gen(RANK, n, dt)
    if not dt.is_floating_point:
        refuses("PREMUL_SUM %s" % dt, lambda: dist.all_reduce(t, premul, group=hc))
        return
    want = gen(RANK, n, dt).to(rd) * 2.5
    dist.all_reduce(want, group=gl)
    dist.all_reduce(t, premul, group=hc)
    check("allreduce PREMUL_SUM %s" % dt, t, want)


def run_moves(dt, rd, hc, gl, n):
    x = lambda rank, salt=0, d=dt: gen(rank, n, dt, salt).to(d)  # noqa: E731
    root = N - 1
    got, want = x(RANK), x(RANK, d=rd)
    dist.broadcast(want, root, group=gl)
    dist.broadcast(got, root, group=hc)
    check("broadcast %s root %d" % (dt, root), got, want)
    want = [torch.empty(n, dtype=rd) for _ in range(N)]
    dist.all_gather(want, x(RANK, d=rd), group=gl)
    got = [torch.empty(n, dtype=dt) for _ in range(N)]
    dist.all_gather(got, x(RANK), group=hc)
    check("allgather %s" % dt, got, want)
    flat = torch.empty(N * n, dtype=dt)
    dist._all_gather_base(flat, x(RANK), group=hc)
    check("_allgather_base %s" % dt, flat, torch.cat(want))
    ins = [x(RANK, 1), x(RANK, 2)[: max(n - 1, 1)]]
    want = [[torch.empty_like(t, dtype=rd) for t in ins] for _ in range(N)]
    got = [[torch.empty_like(t) for t in ins] for _ in range(N)]
    dist.all_gather_coalesced(want, [t.to(rd) for t in ins], group=gl)
    dist.all_gather_coalesced(got, ins, group=hc)
    check("allgather_coalesced %s" % dt, sum(got, []), sum(want, []))
    dst = 1 % N
    want = [torch.empty(n, dtype=rd) for _ in range(N)] if RANK == dst else None
    got = [torch.empty(n, dtype=dt) for _ in range(N)] if RANK == dst else None
    dist.gather(x(RANK, d=rd), want, dst, group=gl)
    dist.gather(x(RANK), got, dst, group=hc)
    if RANK == dst:
        check("gather %s root %d" % (dt, dst), got, want)
    src = N // 2
    ins = [x(RANK, p) for p in range(N)] if RANK == src else None
    got, want = torch.empty(n, dtype=dt), torch.empty(n, dtype=rd)
    dist.scatter(want, [t.to(rd) for t in ins] if ins else None, src, group=gl)
    dist.scatter(got, ins, src, group=hc)
    check("scatter %s root %d" % (dt, src), got, want)
    run_alltoall(dt, rd, hc, gl, n)
    run_p2p(dt, rd, hc, gl, n)


def run_alltoall(dt, rd, hc, gl, n):
    want, got = torch.empty(n * N, dtype=rd), torch.empty(n * N, dtype=dt)
    dist.all_to_all_single(want, gen(RANK, n * N, dt).to(rd), group=gl)
    dist.all_to_all_single(got, gen(RANK, n * N, dt), group=hc)
    check("alltoall_base %s" % dt, got, want)
    # uneven blocks: rank r sends r + p + 1 rows of 2 to rank p
    rows = [RANK + p + 1 for p in range(N)]
    back = [p + RANK + 1 for p in range(N)]
    src = gen(RANK, 2 * sum(rows), dt, 5).view(-1, 2)
    want = torch.empty(sum(back), 2, dtype=rd)
    got = torch.empty(sum(back), 2, dtype=dt)
    dist.all_to_all_single(want, src.to(rd), back, rows, group=gl)
    dist.all_to_all_single(got, src, back, rows, group=hc)
    check("alltoall_base with split sizes %s" % dt, got, want)
    # the list form, blocks of uneven sizes: gloo's reference is the flat form
    ins = list(src.split(rows))
    outs = [torch.empty(b, 2, dtype=dt) for b in back]
    dist.all_to_all(outs, ins, group=hc)
    check("alltoall %s" % dt, outs, list(want.split(back)))


def run_p2p(dt, rd, hc, gl, n):
    if N == 1:
        return
    nxt, prv = (RANK + 1) % N, (RANK - 1) % N
    results = []
    for g, d in ((gl, rd), (hc, dt)):
        got = torch.empty(n, dtype=d)
        if RANK % 2 == 0:
            dist.send(gen(RANK, n, dt, 7).to(d), nxt, group=g)
            dist.recv(got, prv, group=g)
        else:
            dist.recv(got, prv, group=g)
            dist.send(gen(RANK, n, dt, 7).to(d), nxt, group=g)
        results.append(got)
    check("send/recv %s" % dt, results[1], results[0])
    # a ring exchange in one batch: every rank sends first
    got = torch.empty(n, dtype=dt)
    ops = [dist.P2POp(dist.isend, gen(RANK, n, dt, 8), nxt, group=hc),
           dist.P2POp(dist.irecv, got, prv, group=hc)]
    for w in dist.batch_isend_irecv(ops):
        w.wait(TIMEOUT)
    check("batch_isend_irecv %s" % dt, got, gen(prv, n, dt, 8))


def run_dtypes(hc, gl):
    for dt in DTYPES:
        # gloo 1.13 has neither bfloat16 nor bool: their references run on
        # float32 (gen's values are exact in both) and on uint8 (0 and 1;
        # a bool result is the integer result's truth: sum is OR, product AND)
        rd = {torch.bfloat16: torch.float32, torch.bool: torch.uint8}.get(dt, dt)
        for n in (1, 37):
            run_reductions(dt, rd, hc, gl, n)
            run_moves(dt, rd, hc, gl, n)
        dist.barrier(group=hc)
    # a larger float32 tensor: several chunks on every path
    run_reductions(torch.float32, torch.float32, hc, gl, 70001)
    run_moves(torch.float32, torch.float32, hc, gl, 70001)


if __name__ == "__main__":
    import torch_extra

    dist.init_process_group("hcomm", init_method=os.environ["HC_TEST_INIT"], rank=RANK,
                            world_size=N, timeout=TIMEOUT)
    assert dist.get_backend() == "hcomm", dist.get_backend()
    gl = dist.new_group(backend="gloo", timeout=TIMEOUT)
    hc = dist.group.WORLD
    run_dtypes(hc, gl)
    torch_extra.run(hc, gl, check, refuses, skip, TIMEOUT)
    dist.barrier()
    dist.destroy_process_group()
    # one write, newline included: the ranks share the launcher's stdout
    os.write(1, ("rank %d: %d checks passed, %d failed, %d skipped\n" %
                 (RANK, stats["pass"], stats["fail"], stats["skip"])).encode())
    sys.exit(1 if stats["fail"] else 0)
