// tensors.hpp - what hcomm can move: tensor checks, dtype and reduction
// mapping between torch and hcomm.
#pragma once

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include <vector>

#include <hcomm.h>

namespace hcomm_torch
{

// Throws (RuntimeError) unless t is a dense CPU tensor.
void checkTensor(const at::Tensor &t, const char *op);

// Throws unless ts holds exactly one tensor (CPU groups have one per rank).
void checkSingle(const std::vector<at::Tensor> &ts, const char *op);

// Throws unless every tensor of ts has ref's dtype and number of elements.
void checkSameAs(const std::vector<at::Tensor> &ts, const at::Tensor &ref, const char *op);

// Throws unless root names a rank of a group of size ranks.
void checkRank(int64_t root, int size, const char *op, const char *what);

// Bytes of t's elements (data-moving ops send every dtype as bytes).
size_t byteCount(const at::Tensor &t);

// A torch reduction as hcomm runs it.
struct Reduction {
    hcomm_dtype_t dtype  = HCOMM_FLOAT32;
    hcomm_op_t    op     = HCOMM_SUM;
    bool          premul = false; // PREMUL_SUM: inputs scaled by factor first
    double        factor = 1.0;
    at::Tensor    factorTensor; // set when the factor came as a tensor
};

// Maps op on dtype to hcomm (bool runs on uint8 with OR/AND semantics, as
// torch's NCCL backend); index picks the PREMUL_SUM factor of the index-th tensor. Throws
// on what hcomm cannot reduce.
Reduction toReduction(const c10d::ReduceOp &op, at::ScalarType dtype, const char *opName,
                      size_t index = 0);

// dst (contiguous staging) <- src, scaled when r asks for it.
void scaleInto(const at::Tensor &dst, const at::Tensor &src, const Reduction *r);

} // namespace hcomm_torch
