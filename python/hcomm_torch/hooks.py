"""hcomm_torch.hooks: DDP communication hooks on hcomm's compressed allreduce.

    import hcomm_torch.hooks as hooks
    state = hooks.CompressionState()           # process_group=None: the default group
    ddp.register_comm_hook(state, hooks.onebit)  # or hooks.topk, hooks.bf16, hooks.fp16

Each hook returns the average over ranks of its gradient bucket, compressed
with error feedback (docs/compression.md): what one step's compression drops
is kept in a residual and sent in a later step. The residuals live in the
process group, one compression state per (CompressionState, bucket index);
a bucket that changes size, dtype or parameters (DDP rebuilds its buckets
after the first iteration, perhaps to the same size in another order) gets a
fresh state, and the group frees them all when it is destroyed. The operation is queued on the group's hcomm stream like an
allreduce, so it overlaps the rest of the backward pass.

Buckets of float32, float16 and bfloat16 are compressed; another dtype
(float64) raises RuntimeError rather than falling back to a plain allreduce.
The process group must be an hcomm one (TypeError otherwise).
"""
import itertools

import torch
import torch.distributed as dist

from . import _C

__all__ = ["CompressionState", "onebit", "topk", "fp16", "bf16"]

# tells two states on one group apart: each keeps its own residuals
_owners = itertools.count()


def _hcomm_group(process_group):
    """process_group, or the default group, checked to be an hcomm one."""
    pg = process_group
    if pg is None:
        if not dist.is_initialized():
            raise RuntimeError("hcomm_torch.hooks: no process group: call "
                               "dist.init_process_group('hcomm', ...) first")
        pg = dist.distributed_c10d._get_default_group()
    if not isinstance(pg, _C.ProcessGroupHcomm):
        name = pg.name() if hasattr(pg, "name") else type(pg).__name__
        raise TypeError("hcomm_torch.hooks need an hcomm process group, not %s: use "
                        "dist.init_process_group('hcomm', ...) or dist.new_group(..., "
                        "backend='hcomm')" % name)
    return pg


class CompressionState:
    """The state a DDP model registers with one of these hooks.

    process_group: the group DDP runs on (None: the default group); it must
    be an hcomm group. topk_ratio: the share of a bucket's entries topk sends
    (0 < ratio <= 1). Use one state per DDP model: its residuals are its own.
    """

    def __init__(self, process_group=None, topk_ratio=0.01):
        if not 0.0 < float(topk_ratio) <= 1.0:
            raise ValueError("hcomm_torch.hooks: topk_ratio %r is not in (0, 1]" % (topk_ratio,))
        self.process_group = process_group
        self.topk_ratio = float(topk_ratio)
        self._owner = next(_owners)
        if process_group is not None or dist.is_initialized():
            _hcomm_group(process_group)  # the error now rather than in backward

    def group(self):
        """The hcomm process group the hooks run on."""
        return _hcomm_group(self.process_group)

    def states(self):
        """How many compression states the group holds (for every owner)."""
        return self.group()._compression_states()


def _compressed(state, bucket, spec):
    if not isinstance(state, CompressionState):
        raise TypeError("hcomm_torch.hooks: register the hook with a "
                        "hcomm_torch.hooks.CompressionState, not %s" % type(state).__name__)
    # which parameters the bucket holds, in order: a residual kept for one
    # layout must not be added to another's values
    layout = hash(tuple((p.data_ptr(), p.numel()) for p in bucket.parameters()))
    work = state.group()._allreduce_compressed(bucket.buffer(), spec, state._owner,
                                                bucket.index(), layout)
    # the Future holds [buffer], averaged in place
    return work.get_future().then(lambda fut: fut.value()[0])


def onebit(state: CompressionState, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
    """Signs and one scale (the mean |value|) per 2048 values: 1/32 of the
    bytes, in two phases (all-to-all of chunks, allgather of their averages)."""
    return _compressed(state, bucket, "onebit")


def topk(state: CompressionState, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
    """The state.topk_ratio share of entries of largest magnitude, as (index,
    value) pairs gathered from every rank: 8 bytes a kept entry."""
    return _compressed(state, bucket, "topk:%r" % state.topk_ratio)


def bf16(state: CompressionState, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
    """A bfloat16 cast (with error feedback) on the ordinary allreduce: half
    the bytes."""
    return _compressed(state, bucket, "bf16")


def fp16(state: CompressionState, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
    """A float16 cast (with error feedback) on the ordinary allreduce, summed
    in float16: half the bytes; a value or sum beyond 65504 becomes inf (bf16
    has float32's range)."""
    return _compressed(state, bucket, "fp16")
