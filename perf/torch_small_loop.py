"""torch_small_loop.py - 8 B dist.all_reduce in a loop on the "hcomm" backend,
timed in chunks, with the calls the backend handed to its stream (how a small
operation that did not finish on the caller's thread goes on; pg_inline.cpp).

usage: torch_small_loop.py [--ranks N] [--chunks C] [--busy B]

N local ranks (default 2) run C chunks (default 10) of 1000 calls; rank 0
prints each chunk's mean time per call (us) and, where the backend counts
them, its hand-overs ("time/hand-overs"). --busy B starts B processes that
only spin for the run's length, beside the ranks: a machine shared with
other work, where a rank that spins waiting holds a CPU a peer needs.
"""
import argparse
import os
import socket
import subprocess
import sys
import time


def rank_main():
    import torch
    import torch.distributed as dist
    import hcomm_torch  # noqa: F401
    torch.set_num_threads(1)
    rank, n = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("hcomm", init_method=os.environ["HC_LOOP_INIT"], rank=rank,
                            world_size=n)
    hc = dist.group.WORLD
    counts = getattr(hc, "_inline_counts", None)
    t = torch.zeros(2)
    out = []
    for _ in range(int(os.environ["HC_LOOP_CHUNKS"])):
        before = counts()[1] if counts else 0
        t0 = time.perf_counter()
        for _ in range(1000):
            dist.all_reduce(t)
        us = (time.perf_counter() - t0) / 1000 * 1e6
        out.append("%.1f/%d" % (us, counts()[1] - before) if counts else "%.1f" % us)
    if rank == 0:
        print("%d ranks, us per call%s, chunks of 1000: %s"
              % (n, " / hand-overs" if counts else "", " ".join(out)), flush=True)
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--chunks", type=int, default=10)
    ap.add_argument("--busy", type=int, default=0)
    args = ap.parse_args()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.busy)]
    env = dict(os.environ, WORLD_SIZE=str(args.ranks), HC_LOOP_CHUNKS=str(args.chunks),
               HC_LOOP_INIT="tcp://127.0.0.1:%d" % port)
    ranks = [subprocess.Popen([sys.executable, "-W", "ignore", __file__], env=dict(env, RANK=str(r)))
             for r in range(args.ranks)]
    codes = [p.wait() for p in ranks]
    for p in busy:
        p.kill()
        p.wait()
    return 0 if all(c == 0 for c in codes) else 1


if __name__ == "__main__":
    sys.exit(rank_main() if "HC_LOOP_INIT" in os.environ else main())
