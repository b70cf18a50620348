// tensors.cpp - what hcomm can move: tensor checks, dtype and reduction mapping.
#include "tensors.hpp"

#include <c10/util/Exception.h>

namespace hcomm_torch
{

void checkTensor(const at::Tensor &t, const char *op)
{
    TORCH_CHECK(t.defined(), "hcomm backend: ", op, ": undefined tensor");
    TORCH_CHECK(!t.is_cuda(), "hcomm backend: ", op,
                ": CUDA tensors are not supported: device memory is not supported yet by the "
                "hcomm backend (move the tensor to the CPU, or use the nccl backend)");
    TORCH_CHECK(t.device().is_cpu(), "hcomm backend: ", op, ": tensors on ", t.device(),
                " are not supported: the hcomm backend moves CPU tensors only");
    TORCH_CHECK(t.layout() == at::kStrided, "hcomm backend: ", op, ": ", t.layout(),
                " tensors are not supported: only dense (strided) tensors");
}

void checkSingle(const std::vector<at::Tensor> &ts, const char *op)
{
    TORCH_CHECK(ts.size() == 1, "hcomm backend: ", op, ": expects one tensor per rank, got ",
                ts.size());
    checkTensor(ts[0], op);
}

void checkSameAs(const std::vector<at::Tensor> &ts, const at::Tensor &ref, const char *op)
{
    for (const auto &t : ts) {
        checkTensor(t, op);
        TORCH_CHECK(t.scalar_type() == ref.scalar_type(), "hcomm backend: ", op,
                    ": tensors of different dtypes (", t.scalar_type(), " and ", ref.scalar_type(),
                    ")");
        TORCH_CHECK(t.numel() == ref.numel(), "hcomm backend: ", op,
                    ": tensors of different sizes (", t.numel(), " and ", ref.numel(),
                    " elements)");
    }
}

void checkRank(int64_t root, int size, const char *op, const char *what)
{
    TORCH_CHECK(root >= 0 && root < size, "hcomm backend: ", op, ": ", what, " ", root,
                " is not a rank of this group of ", size);
}

size_t byteCount(const at::Tensor &t)
{
    return static_cast<size_t>(t.numel()) * t.element_size();
}

static hcomm_dtype_t reduceDtype(at::ScalarType st, const char *op)
{
    switch (st) {
    case at::kFloat:
        return HCOMM_FLOAT32;
    case at::kDouble:
        return HCOMM_FLOAT64;
    case at::kHalf:
        return HCOMM_FLOAT16;
    case at::kBFloat16:
        return HCOMM_BFLOAT16;
    case at::kChar:
        return HCOMM_INT8;
    case at::kByte:
        return HCOMM_UINT8;
    case at::kInt:
        return HCOMM_INT32;
    case at::kLong:
        return HCOMM_INT64;
    case at::kBool:
        return HCOMM_UINT8; // one byte, 0 or 1 (see boolOp)
    default:
        TORCH_CHECK(false, "hcomm backend: ", op, ": cannot reduce ", st,
                    " tensors (hcomm reduces float32, float64, float16, bfloat16, int8, uint8, "
                    "int32, int64 and bool)");
    }
}

// bool as torch's NCCL backend does it: a sum or max is an OR, a product or
// min an AND (Gloo refuses bool).
static hcomm_op_t boolOp(c10d::ReduceOp::RedOpType op, const char *opName)
{
    switch (op) {
    case c10d::ReduceOp::SUM:
    case c10d::ReduceOp::MAX:
    case c10d::ReduceOp::BOR:
        return HCOMM_MAX;
    case c10d::ReduceOp::PRODUCT:
    case c10d::ReduceOp::MIN:
    case c10d::ReduceOp::BAND:
        return HCOMM_MIN;
    default:
        TORCH_CHECK(false, "hcomm backend: ", opName, ": reduction ", static_cast<int>(op),
                    " (AVG, PREMUL_SUM or BXOR) has no meaning on bool tensors");
    }
}

static void premulFactor(const c10d::ReduceOp &op, size_t index, Reduction &r, const char *opName)
{
    auto *sup = dynamic_cast<c10d::NCCLPreMulSumSupplement *>(op.supplement_.get());
    TORCH_CHECK(sup != nullptr, "hcomm backend: ", opName, ": PREMUL_SUM without its factor");
    r.premul = true;
    if (sup->tensor_factors.empty()) {
        r.factor = sup->double_factor;
        return;
    }
    const at::Tensor &f = sup->tensor_factors[std::min(index, sup->tensor_factors.size() - 1)];
    checkTensor(f, opName);
    TORCH_CHECK(f.numel() == 1, "hcomm backend: ", opName,
                ": a PREMUL_SUM factor tensor must hold one element, not ", f.numel());
    r.factorTensor = f;
}

Reduction toReduction(const c10d::ReduceOp &op, at::ScalarType st, const char *opName, size_t index)
{
    Reduction r;
    r.dtype = reduceDtype(st, opName);
    if (st == at::kBool) {
        r.op = boolOp(op.op_, opName);
        return r;
    }
    switch (op.op_) {
    case c10d::ReduceOp::SUM:
        r.op = HCOMM_SUM;
        break;
    case c10d::ReduceOp::PRODUCT:
        r.op = HCOMM_PROD;
        break;
    case c10d::ReduceOp::MIN:
        r.op = HCOMM_MIN;
        break;
    case c10d::ReduceOp::MAX:
        r.op = HCOMM_MAX;
        break;
    case c10d::ReduceOp::AVG:
        r.op = HCOMM_AVG;
        break; // integers truncate, as NCCL's
    case c10d::ReduceOp::PREMUL_SUM:
        TORCH_CHECK(at::isFloatingType(st), "hcomm backend: ", opName,
                    ": PREMUL_SUM needs floating-point tensors, not ", st);
        premulFactor(op, index, r, opName);
        break;
    default:
        TORCH_CHECK(false, "hcomm backend: ", opName,
                    ": bitwise reductions (BAND, BOR, BXOR) are not supported on ", st,
                    " tensors: hcomm has SUM, PRODUCT, MIN, MAX, AVG and PREMUL_SUM");
    }
    return r;
}

void scaleInto(const at::Tensor &dst, const at::Tensor &src, const Reduction *r)
{
    at::Tensor d = dst.view(src.sizes());
    d.copy_(src);
    if (r == nullptr || !r->premul)
        return;
    if (r->factorTensor.defined())
        d.mul_(r->factorTensor.to(d.scalar_type()).reshape({}));
    else
        d.mul_(r->factor);
}

} // namespace hcomm_torch
