"""torch_bench.py - the "hcomm" torch.distributed backend beside torch's own
"gloo", through torch's API, in one run (issue 20's figures, perf/RESULTS.md).

usage: torch_bench.py [--ranks 2,4] [--quick] [--min-size BYTES] [--max-size BYTES] [--parts LIST]
                      [--hcomm-perf PATH]

For each rank count it launches that many local ranks; each makes an "hcomm"
and a "gloo" group over the same ranks and measures, alternating the backends
so that both see the same machine:
  allreduce  dist.all_reduce of float32, 1 KiB to 64 MiB: time and busbw
             (nccl-tests' busbw = bytes / time x 2 (n-1) / n), the slowest
             rank's mean of the best of 3 rounds;
  ddp        one DDP training step (forward, backward with DDP's bucketed
             allreduces, SGD) of a 21 M parameter MLP, 25 MiB buckets, batches
             of 1 and 8 per rank: the median step time of 3 rounds of 10
             steps, beside the same step without DDP (the compute alone);
  small      an 8 B all_reduce through torch on hcomm and on gloo, beside
             the same call on a group of one rank, which moves nothing, on a
             backend that does nothing (torch_null.cpp, built by
             torch.utils.cpp_extension: its Work is complete at once; torch's
             own cost per call, the floor under any backend), and blocking
             8 B hcomm_allreduce calls from C++ on the group's communicator;
             all interleaved, in 31 chunks of 1000 calls (gloo: 100), so that
             each chunk sees every variant in one state of the machine. The
             bound's reading, (hcomm - null) / C, is taken per chunk; then
             hcomm-perf -b 8 -e 8 -z 1 by itself, the figure earlier runs used.
Rank 0 prints the tables. One thread of torch per rank (torch.set_num_threads),
as ranks share this machine's cores.
"""
import argparse
import contextlib
import datetime
import io
import os
import re
import socket
import statistics
import subprocess
import sys
import time

SIZES = [1 << k for k in range(10, 27)]  # 1 KiB .. 64 MiB
DDP_WIDTH, DDP_LAYERS, DDP_BATCHES = 2048, 5, (1, 8)


def timed(fn, iters):
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
    return (time.perf_counter() - t0) / iters


def slowest(value, gloo):
    """The largest of the ranks' values (a collective ends with its slowest rank)."""
    import torch
    import torch.distributed as dist
    t = torch.tensor([value], dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX, group=gloo)
    return t.item()


def bench_allreduce(groups, n, quick):
    import torch
    import torch.distributed as dist
    rows = []
    sizes = SIZES[::4] if quick else SIZES
    sizes = [s for s in sizes
             if int(os.environ["HC_BENCH_MIN"]) <= s <= int(os.environ["HC_BENCH_MAX"])]
    for size in sizes:
        t = torch.ones(size // 4)
        iters = max(5, min(1000, (256 << 20) // size))  # 256 MiB a round, 5 calls at least
        if quick:
            iters = max(2, iters // 10)
        best = {}
        for rnd in range(3):
            for name, g in groups.items():
                dist.all_reduce(t, group=g)  # warm, and lines the ranks up
                dist.barrier(group=groups["gloo"])
                sec = slowest(timed(lambda: dist.all_reduce(t, group=g), iters), groups["gloo"])
                best[name] = min(best.get(name, sec), sec)
        bus = {k: size / v * 2 * (n - 1) / n / 1e9 for k, v in best.items()}
        rows.append((size, best["gloo"], bus["gloo"], best["hcomm"], bus["hcomm"],
                     bus["hcomm"] / bus["gloo"]))
    return rows


def make_model(seed):
    import torch
    torch.manual_seed(seed)
    layers = []
    for _ in range(DDP_LAYERS):
        layers += [torch.nn.Linear(DDP_WIDTH, DDP_WIDTH), torch.nn.ReLU()]
    return torch.nn.Sequential(*layers)


def bench_ddp(groups, rank, quick, batch):
    """Median step time of DDP on each backend, and of the same model without
    DDP (no communication: the compute a step holds)."""
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    models, opts = {"local": make_model(1)}, {}
    for name, g in groups.items():
        models[name] = DDP(make_model(1), process_group=g, bucket_cap_mb=25)
    for name, m in models.items():
        opts[name] = torch.optim.SGD(m.parameters(), lr=1e-3)
    params = sum(p.numel() for p in models["local"].parameters())
    torch.manual_seed(100 + rank)
    x, y = torch.randn(batch, DDP_WIDTH), torch.randn(batch, DDP_WIDTH)

    def step(name):
        opts[name].zero_grad()
        loss = torch.nn.functional.mse_loss(models[name](x), y)
        loss.backward()
        opts[name].step()

    steps = 3 if quick else 10
    times = {k: [] for k in models}
    for rnd in range(3):
        for name in models:
            step(name)  # the first step builds DDP's buckets
            dist.barrier(group=groups["gloo"])
            times[name].append(slowest(timed(lambda: step(name), steps), groups["gloo"]))
    med = {k: statistics.median(v) for k, v in times.items()}
    return params, med


def load_null():
    """torch_null.cpp's module (compiled on first use, then cached)."""
    with contextlib.redirect_stderr(io.StringIO()):  # "No CUDA runtime is found"
        from torch.utils import cpp_extension
    src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "torch_null.cpp")
    return cpp_extension.load("hcomm_bench_null", [src], extra_cflags=["-O2"])


SMALL_CHUNKS, SMALL_CALLS = 31, 1000  # gloo's chunks are a tenth as long (its call: 0.2-0.5 ms)
C_NAME, NULL_NAME = "hcomm_allreduce from C, same communicator", "null backend (torch's floor)"


def bench_small(groups, rank, n):
    """Every variant's 8 B call time in each of SMALL_CHUNKS chunks, the variants
    interleaved in a rotating order so that each chunk sees them all in one
    state of the machine: {name: [seconds per call, a chunk each]}."""
    import torch
    import torch.distributed as dist
    null = load_null()
    if not hasattr(dist.Backend, "NULL"):
        dist.Backend.register_backend("null", lambda store, r, size, timeout:
                                      null.NullGroup(r, size))
    t = torch.zeros(2)
    solo = None
    for r in range(n):  # every rank makes every one-rank group, in the same order
        g = dist.new_group([r], backend="hcomm")
        if r == rank:
            solo = g
    hc, gloo = groups["hcomm"], groups["gloo"]
    nullg = dist.new_group(backend="null")

    def torch_calls(g):
        def run(k):
            t0 = time.perf_counter()
            for _ in range(k):
                dist.all_reduce(t, group=g)
            return (time.perf_counter() - t0) / k
        return run
    variants = [("gloo", torch_calls(gloo)), ("hcomm", torch_calls(hc)),
                ("hcomm, 1 rank", torch_calls(solo)), (NULL_NAME, torch_calls(nullg))]
    if hasattr(hc, "_time_c_allreduce"):  # hcomm_allreduce from C++, between the torch calls
        variants.append((C_NAME, hc._time_c_allreduce))
    counts = getattr(hc, "_inline_counts", lambda: (0, 0))
    before, calls = counts(), 0
    out = {name: [] for name, _ in variants}
    for chunk in range(SMALL_CHUNKS):
        k = chunk % len(variants)
        for name, run in variants[k:] + variants[:k]:
            m = SMALL_CALLS // 10 if name == "gloo" else SMALL_CALLS
            run(m // 10)  # warm
            dist.barrier(group=gloo)
            out[name].append(slowest(run(m), gloo))
            calls += m + m // 10 if name == "hcomm" else 0
    after = counts()
    # how rank 0's calls on hcomm ran (pg_inline.cpp): on the caller's thread,
    # handed to the stream unfinished, or queued on it
    return out, (after[0] - before[0], after[1] - before[1], calls) if hasattr(hc, "_inline_counts") else None


def small_report(chunks):
    """Rank 0's lines on the 8 B calls: each variant's median over the chunks,
    and the bound's reading per chunk: (hcomm - null) / C."""
    print("(us per call: the median of %d chunks, and their range)" % SMALL_CHUNKS)
    for name, secs in chunks.items():
        print("- %s: %.2f (%.2f-%.2f)" % (name, statistics.median(secs) * 1e6, min(secs) * 1e6,
                                          max(secs) * 1e6))
    if C_NAME not in chunks:
        return
    own = [h - z for h, z in zip(chunks["hcomm"], chunks[NULL_NAME])]
    ratio = [o / c for o, c in zip(own, chunks[C_NAME])]
    print("- the backend's own cost, hcomm - null: %.2f us (median of the chunks'), "
          "%.2fx the C call (median of the chunks' ratios; range %.2f-%.2f; bound: 2x; "
          "at most 2x in %d of %d chunks)"
          % (statistics.median(own) * 1e6, statistics.median(ratio), min(ratio), max(ratio),
             sum(r <= 2 for r in ratio), len(ratio)))


def rank_main():
    import torch
    import torch.distributed as dist
    import hcomm_torch  # noqa: F401
    rank, n = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    quick = os.environ.get("HC_BENCH_QUICK") == "1"
    torch.set_num_threads(1)
    timeout = datetime.timedelta(seconds=600)
    dist.init_process_group("hcomm", init_method=os.environ["HC_BENCH_INIT"], rank=rank,
                            world_size=n, timeout=timeout)
    groups = {"gloo": dist.new_group(backend="gloo", timeout=timeout),
              "hcomm": dist.group.WORLD}
    parts = os.environ["HC_BENCH_PARTS"].split(",")
    ar = bench_allreduce(groups, n, quick) if "allreduce" in parts else []
    small, how = bench_small(groups, rank, n) if "small" in parts else ({}, None)
    ddp = [(b,) + bench_ddp(groups, rank, quick, b) for b in DDP_BATCHES] if "ddp" in parts else []
    if rank == 0 and ar:
        print("## %d ranks: dist.all_reduce, float32, sum" % n)
        print("| size | gloo time (us) | gloo busbw (GB/s) | hcomm time (us) | "
              "hcomm busbw (GB/s) | hcomm / gloo |")
        print("|---:|---:|---:|---:|---:|---:|")
        for size, gt, gb, ht, hb, ratio in ar:
            print("| %s | %.1f | %.3f | %.1f | %.3f | %.2f |"
                  % (human(size), gt * 1e6, gb, ht * 1e6, hb, ratio))
    if rank == 0 and small:
        print("\n## %d ranks: 8 B dist.all_reduce" % n)
        small_report(small)
        if how is not None:
            print("- hcomm's %d calls on rank 0: %d on the caller's thread, %d handed over "
                  "unfinished, %d queued" % (how[2], how[0], how[1], how[2] - how[0] - how[1]))
    if rank == 0 and ddp:
        print("\n## %d ranks: DDP step, %.1f M parameters, 25 MiB buckets (ms, median)"
              % (n, ddp[0][1] / 1e6))
        print("| batch per rank | no DDP (compute) | gloo | hcomm | gloo / hcomm |")
        print("|---:|---:|---:|---:|---:|")
        for batch, _, med in ddp:
            print("| %d | %.1f | %.1f | %.1f | %.2f |" % (batch, med["local"] * 1e3,
                  med["gloo"] * 1e3, med["hcomm"] * 1e3, med["gloo"] / med["hcomm"]))
        print()
    dist.barrier(group=groups["gloo"])
    dist.destroy_process_group()
    return 0


def human(size):
    return "%d MiB" % (size >> 20) if size >= 1 << 20 else "%d KiB" % (size >> 10)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def c_small(args, n):
    """hcomm_allreduce of 8 B from C: hcomm-perf's time column (blocking calls)."""
    if not args.hcomm_perf:
        return None
    cmd = [args.hcomm_perf, "all_reduce", "--ranks", str(n), "-b", "8", "-e", "8",
           "-n", "2000", "-w", "200", "-z", "1", "-c", "0", "-N", "3"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300).stdout
    times = [float(m.group(1)) for m in re.finditer(r"^\s+8\s+2\s+float\s+sum\s+-?\d+\s+([\d.]+)",
                                                     out, re.M)]
    return min(times) if times else None


def launch(args, n):
    if "small" in args.parts:
        load_null()  # compiled here once, not by every rank at once
    env = dict(os.environ, WORLD_SIZE=str(n), HC_BENCH_INIT="tcp://127.0.0.1:%d" % free_port(),
               HC_BENCH_QUICK="1" if args.quick else "0", HC_BENCH_PARTS=args.parts,
               HC_BENCH_MAX=str(args.max_size), HC_BENCH_MIN=str(args.min_size))
    procs = [subprocess.Popen([sys.executable, "-W", "ignore", __file__],
                              env=dict(env, RANK=str(r))) for r in range(n)]
    codes = [p.wait(timeout=1800) for p in procs]
    c = c_small(args, n) if "small" in args.parts else None
    if c is not None:  # the figure earlier runs compared with, for reference
        print("- hcomm-perf by itself after the run (-b 8 -e 8 -z 1, best of 3 runs): %.2f us" % c)
    print()
    return 0 if all(x == 0 for x in codes) else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ranks", default="2,4")
    ap.add_argument("--quick", action="store_true", help="fewer sizes and iterations")
    ap.add_argument("--max-size", type=int, default=SIZES[-1], help="allreduce: largest size")
    ap.add_argument("--min-size", type=int, default=SIZES[0], help="allreduce: smallest size")
    ap.add_argument("--hcomm-perf", default="")
    ap.add_argument("--parts", default="allreduce,small,ddp", help="what to measure")
    args = ap.parse_args()
    print("# torch %s, %s; %s" % (__import__("torch").__version__, time.strftime("%Y-%m-%d %H:%M"),
                                  " ".join(sys.argv)), flush=True)
    rc = 0
    for n in (int(x) for x in args.ranks.split(",")):
        sys.stdout.flush()
        rc |= launch(args, n)
    return rc


if __name__ == "__main__":
    sys.exit(rank_main() if "HC_BENCH_INIT" in os.environ else main())
