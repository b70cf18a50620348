// work.cpp - HcommWork and Completion: a torch collective on an hcomm stream.
#include "work.hpp"

#include <ATen/core/jit_type.h>
#include <c10/util/Exception.h>
#include <torch/csrc/autograd/grad_mode.h>

#include <stdexcept>

namespace hcomm_torch
{

// The Future's type, made once: a small operation's whole cost is ~1 us
static const c10::TypePtr &listOfTensors()
{
    static const c10::TypePtr t = c10::ListType::create(c10::TensorType::get());
    return t;
}

HcommWork::HcommWork(int rank, c10d::OpType type, const char *name, std::vector<at::Tensor> outputs)
    : c10d::Work(rank, type), name_(name), outputs_(std::move(outputs)),
      future_(c10::make_intrusive<c10::ivalue::Future>(listOfTensors()))
{
}

void HcommWork::stageIn(const at::Tensor &dst, const at::Tensor &src, const Reduction *r)
{
    stageIn_.push_back({dst, src, r != nullptr, r != nullptr ? *r : Reduction{}});
}

void HcommWork::copyBack(const at::Tensor &dst, const at::Tensor &src)
{
    copyBack_.push_back({dst, src, false, Reduction{}});
}

void HcommWork::keep(const at::Tensor &t)
{
    kept_.push_back(t);
}

void HcommWork::runStageIn(void *arg)
{
    auto *w = static_cast<HcommWork *>(arg);
    // the user's tensors may require grad; these copies are not part of a graph
    at::NoGradGuard no_grad;
    try {
        for (const auto &c : w->stageIn_)
            scaleInto(c.dst, c.src, c.scaled ? &c.r : nullptr);
    } catch (...) {
        w->stageError_ = std::current_exception();
    }
}

void HcommWork::stageInNow()
{
    runStageIn(this);
    stageIn_.clear(); // the staging tensors stay in kept_
}

// A tensor's storage: what two tensors that alias share.
static const void *storageOf(const at::Tensor &t)
{
    return t.storage().unsafeGetStorageImpl();
}

void HcommWork::outputStorages(std::vector<const void *> &out) const
{
    for (const auto &t : outputs_)
        out.push_back(storageOf(t));
}

bool HcommWork::stagesFrom(const std::vector<const void *> &storages) const
{
    for (const auto &c : stageIn_)
        for (const void *s : storages)
            if (storageOf(c.src) == s)
                return true;
    return false;
}

void HcommWork::complete(hcomm_status_t st)
{
    end(settle(st));
}

std::exception_ptr HcommWork::settle(hcomm_status_t st)
{
    std::exception_ptr err = stageError_;
    if (err == nullptr && st != HCOMM_SUCCESS)
        err = std::make_exception_ptr(std::runtime_error(
            std::string("hcomm backend: ") + name_ + " failed on rank " + std::to_string(rank_) +
            ": " + hcomm_status_str(st) + " (" + hcomm_status_name(st) + ")"));
    if (err == nullptr) {
        at::NoGradGuard no_grad;
        try {
            for (const auto &c : copyBack_)
                c.dst.copy_(c.src.view(c.dst.sizes()));
        } catch (...) {
            err = std::current_exception();
        }
    }
    // hcomm is done with them: the outputs stay with the Future
    kept_.clear();
    stageIn_.clear();
    copyBack_.clear();
    if (err != nullptr)
        future_->setError(err);
    else
        future_->markCompleted(c10::IValue(outputs_));
    return err;
}

c10::intrusive_ptr<c10::ivalue::Future> HcommWork::getFuture()
{
    return future_;
}

std::vector<at::Tensor> HcommWork::result()
{
    return outputs_;
}

static thread_local hcomm_stream_t completing = nullptr;

hcomm_status_t Completion::ownStatus(hcomm_status_t st)
{
    if (stream == nullptr || streamSeen == nullptr)
        return st;
    // the stream's first error; only the tasks of this Completion's operation
    // ran on it since the last Completion saw it (a stream runs in order)
    hcomm_status_t now = hcomm_stream_query(stream);
    if (now == HCOMM_IN_PROGRESS)
        now = HCOMM_SUCCESS;
    hcomm_status_t before = streamSeen->exchange(now, std::memory_order_acq_rel);
    if (st != HCOMM_SUCCESS || comm == nullptr)
        return st;
    if (before == HCOMM_SUCCESS)
        return now;
    // the stream failed earlier, so it cannot tell; a failed step fails comm
    return hcomm_comm_get_error(comm);
}

hcomm_stream_t Completion::runningOn()
{
    return completing;
}

void Completion::run(void *arg)
{
    auto          *c  = static_cast<Completion *>(arg);
    hcomm_status_t st = c->status;
    // the stream ran the operation before this function: the test finds it done
    if (c->req != nullptr) {
        int done = 0;
        st       = hcomm_test(&c->req, &done);
        if (!done)
            st = hcomm_wait(&c->req);
    }
    st = c->ownStatus(st);
    std::vector<std::exception_ptr> errs;
    {
        // while the Futures' callbacks run here (restored for a nested one)
        struct Mark {
            hcomm_stream_t outer = completing;
            explicit Mark(hcomm_stream_t s)
            {
                completing = s;
            }
            ~Mark()
            {
                completing = outer;
            }
        } mark(c->stream);
        for (auto &w : c->works)
            errs.push_back(w->settle(st));
    }
    // after the copy-backs and the Futures' callbacks, as on the stream, and
    // before wait() returns: the waiter's next operation may then run inline
    // (after finish() a woken waiter often ran before this thread got here)
    if (c->wrote != nullptr)
        c->wrote->store(true, std::memory_order_release);
    if (c->pending != nullptr)
        c->pending->fetch_sub(1, std::memory_order_release);
    for (size_t i = 0; i < c->works.size(); i++)
        c->works[i]->end(errs[i]);
    delete c;
}

} // namespace hcomm_torch
