// pg.cpp - ProcessGroupHcomm's life (the unique id through torch's store,
// the communicator, its stream) and the path every operation takes.
#include "pg.hpp"

#include <c10/util/Exception.h>

#include <algorithm>
#include <cstring>
#include <string>

namespace hcomm_torch
{

std::string statusText(hcomm_status_t st)
{
    return std::string(hcomm_status_str(st)) + " (" + hcomm_status_name(st) + ")";
}

hcomm_status_t inGroup(const std::function<hcomm_status_t()> &body)
{
    hcomm_status_t st = hcomm_group_start();
    if (st != HCOMM_SUCCESS)
        return st;
    st                 = body();
    hcomm_status_t end = hcomm_group_end();
    return st != HCOMM_SUCCESS ? st : end;
}

ProcessGroupHcomm::ProcessGroupHcomm(const c10::intrusive_ptr<c10d::Store> &store, int rank,
                                     int size, std::chrono::milliseconds timeout)
    : c10d::ProcessGroup(rank, size)
{
    readInlineSettings(); // throws on a bad value, before anything is made
    // each group has a store prefix of its own, so one key serves them all
    static const std::string key = "hcomm_unique_id";
    hcomm_unique_id_t        id;
    if (rank == 0) {
        hcomm_status_t st = hcomm_get_unique_id(&id);
        TORCH_CHECK(st == HCOMM_SUCCESS,
                    "hcomm backend: hcomm_get_unique_id failed: ", statusText(st));
        const auto *p = reinterpret_cast<const uint8_t *>(&id);
        store->set(key, std::vector<uint8_t>(p, p + sizeof(id)));
    } else {
        std::vector<uint8_t> v = store->get(key); // waits, at most the store's timeout
        TORCH_CHECK(v.size() == sizeof(id), "hcomm backend: the store's ", key, " holds ", v.size(),
                    " bytes, not the ", sizeof(id), " of an hcomm unique id");
        std::memcpy(&id, v.data(), sizeof(id));
    }
    hcomm_status_t st = hcomm_comm_init(&comm_, size, &id, rank);
    TORCH_CHECK(st == HCOMM_SUCCESS, "hcomm backend: rank ", rank, " of ", size,
                ": hcomm_comm_init failed: ", statusText(st));
    // the group's timeout bounds every operation; HCOMM_TIMEOUT bounded init
    if (timeout.count() > 0)
        st = hcomm_comm_set_timeout(comm_, static_cast<double>(timeout.count()) / 1e3);
    if (st == HCOMM_SUCCESS)
        st = hcomm_stream_create(&stream_);
    if (st != HCOMM_SUCCESS) {
        shutdown();
        TORCH_CHECK(false, "hcomm backend: rank ", rank,
                    ": setting up the communicator failed: ", statusText(st));
    }
    init();
}

ProcessGroupHcomm::~ProcessGroupHcomm()
{
    shutdown();
}

void ProcessGroupHcomm::quiesce()
{
    // a callback on stream_ may queue more on aux_ (made then), whose own may
    // queue on stream_: twice round. Read under mu_, where an issue from a
    // callback swaps them (ReentrantIssue), not held while waiting: the
    // callbacks issue too.
    withoutGil([this] {
        for (int round = 0; round < 2; round++) {
            hcomm_stream_t streams[2];
            {
                std::lock_guard<std::mutex> g(mu_);
                streams[0] = stream_, streams[1] = aux_;
            }
            for (hcomm_stream_t s : streams)
                if (s != nullptr)
                    (void)hcomm_stream_synchronize(s); // its error is the works' already
        }
    });
}

void ProcessGroupHcomm::shutdown()
{
    // the stream runs its queued work first, whose Futures may call Python
    // and queue more on aux_
    withoutGil([this] {
        if (stream_ != nullptr)
            hcomm_stream_destroy(stream_);
        stream_ = nullptr;
        if (aux_ != nullptr)
            hcomm_stream_destroy(aux_);
        aux_ = nullptr;
        coalesced_.clear();
        queuedWrites_.clear();
        destroyCompressStates(); // the stream that used them has ended
        if (comm_ != nullptr) {
            // a failed communicator's peers may be gone: abort, not a clean destroy
            if (hcomm_comm_get_error(comm_) != HCOMM_SUCCESS)
                hcomm_comm_abort(comm_);
            else
                hcomm_comm_destroy(comm_);
        }
        comm_ = nullptr;
    });
}

c10::intrusive_ptr<HcommWork> ProcessGroupHcomm::makeWork(c10d::OpType type, const char *name,
                                                          Tensors outputs)
{
    return c10::make_intrusive<HcommWork>(rank_, type, name, std::move(outputs));
}

void ProcessGroupHcomm::queueCompletion(Completion *c)
{
    pending_.fetch_add(1, std::memory_order_relaxed);
    c->pending = &pending_;
    c->stream  = stream_;
    QueuedWrites q;
    for (const auto &w : c->works)
        w->outputStorages(q.storages);
    if (!q.storages.empty()) {
        if (queuedWrites_.size() >= 64) // bounded by what is outstanding
            forgetEndedWrites();
        q.done   = std::make_shared<std::atomic<bool>>(false);
        c->wrote = q.done;
        queuedWrites_.push_back(std::move(q));
    }
    c->streamSeen = aux_ != nullptr && stream_ == aux_ ? &auxSeen_ : &mainSeen_;
    if (hcomm_launch_host_func(stream_, Completion::run, c) == HCOMM_SUCCESS)
        return;
    // cannot queue it (out of memory): IssueLock completes it once the stream
    // ran what is before it, after mu_ is released
    unqueued_.push_back(c);
}

void ProcessGroupHcomm::forgetEndedWrites()
{
    auto ended = [](const QueuedWrites &q) { return q.done->load(std::memory_order_acquire); };
    queuedWrites_.erase(std::remove_if(queuedWrites_.begin(), queuedWrites_.end(), ended),
                        queuedWrites_.end());
}

bool ProcessGroupHcomm::stagesFromQueuedOutput(const HcommWork &w)
{
    forgetEndedWrites();
    for (const auto &q : queuedWrites_)
        if (w.stagesFrom(q.storages))
            return true;
    return false;
}

ProcessGroupHcomm::WorkPtr ProcessGroupHcomm::launch(const c10::intrusive_ptr<HcommWork> &w,
                                                     const Issue &issue, bool localSteps)
{
    IssueLock lock(*this);
    return launchLocked(w, issue, localSteps);
}

ProcessGroupHcomm::WorkPtr ProcessGroupHcomm::launchLocked(const c10::intrusive_ptr<HcommWork> &w,
                                                           const Issue &issue, bool localSteps)
{
    TORCH_CHECK(stream_ != nullptr, "hcomm backend: ", w->name(), ": the group is shut down");
    ReentrantIssue reentrant(*this);
    // w outlives this host function: its completion is always queued after it
    hcomm_status_t st = HCOMM_SUCCESS;
    if (w->hasStageIn())
        st = hcomm_launch_host_func(stream_, HcommWork::runStageIn, w.get());
    TORCH_CHECK(st == HCOMM_SUCCESS, "hcomm backend: ", w->name(),
                ": queueing the input copies failed: ", statusText(st));
    st     = issue();
    auto c = new Completion;
    c->works.push_back(w);
    if (localSteps)
        c->comm = comm_;
    if (coalescing_ && st == HCOMM_SUCCESS) {
        delete c; // endCoalescing completes it with the group's operation
        coalesced_.push_back(w);
        return w;
    }
    if (st == HCOMM_SUCCESS)
        st = hcomm_stream_last_request(stream_, &c->req);
    // a request went to the stream: comm_ takes its lock from now on
    streamed_ = streamed_ || st == HCOMM_SUCCESS;
    c->status = st;
    queueCompletion(c);
    if (coalescing_)
        coalesceError_ = st;
    TORCH_CHECK(st == HCOMM_SUCCESS, "hcomm backend: ", w->name(), " on rank ", rank_,
                " failed: ", statusText(st));
    return w;
}

ProcessGroupHcomm::WorkPtr ProcessGroupHcomm::launchEmpty(const c10::intrusive_ptr<HcommWork> &w)
{
    IssueLock lock(*this);
    TORCH_CHECK(stream_ != nullptr, "hcomm backend: ", w->name(), ": the group is shut down");
    ReentrantIssue reentrant(*this);
    if (w->hasStageIn()) {
        hcomm_status_t st = hcomm_launch_host_func(stream_, HcommWork::runStageIn, w.get());
        TORCH_CHECK(st == HCOMM_SUCCESS, "hcomm backend: ", w->name(),
                    ": queueing the input copies failed: ", statusText(st));
    }
    auto c = new Completion;
    c->works.push_back(w);
    queueCompletion(c);
    return w;
}

void ProcessGroupHcomm::startCoalescing()
{
    IssueLock lock(*this);
    TORCH_CHECK(!coalescing_, "hcomm backend: startCoalescing while coalescing already");
    hcomm_status_t st = hcomm_group_start();
    TORCH_CHECK(st == HCOMM_SUCCESS, "hcomm backend: hcomm_group_start: ", statusText(st));
    coalescing_    = true;
    coalesceError_ = HCOMM_SUCCESS;
    coalescingHere_++;
}

void ProcessGroupHcomm::endCoalescing(std::vector<WorkPtr> & /* reqs: the works we hold */)
{
    IssueLock lock(*this);
    TORCH_CHECK(coalescing_, "hcomm backend: endCoalescing without startCoalescing");
    coalescing_ = false;
    coalescingHere_--;
    hcomm_status_t st = hcomm_group_end();
    auto           c  = new Completion;
    c->works.swap(coalesced_);
    if (st == HCOMM_SUCCESS && !c->works.empty()) {
        st        = hcomm_stream_last_request(stream_, &c->req);
        streamed_ = streamed_ || st == HCOMM_SUCCESS;
    }
    c->status = st;
    queueCompletion(c);
    TORCH_CHECK(st == HCOMM_SUCCESS && coalesceError_ == HCOMM_SUCCESS,
                "hcomm backend: a coalesced batch of operations failed on rank ", rank_, ": ",
                statusText(st != HCOMM_SUCCESS ? st : coalesceError_));
}

at::Tensor ProcessGroupHcomm::contiguous(HcommWork &w, const at::Tensor &t, bool in, bool out)
{
    if (t.is_contiguous()) {
        w.keep(t);
        return t;
    }
    at::Tensor c = at::empty(t.sizes(), t.options().memory_format(at::MemoryFormat::Contiguous));
    w.keep(c);
    if (in)
        w.stageIn(c, t);
    if (out)
        w.copyBack(t, c);
    return c;
}

at::Tensor ProcessGroupHcomm::reduceInput(HcommWork &w, const at::Tensor &t, const at::Tensor &buf,
                                          const Reduction &r)
{
    if (!r.premul)
        return buf;
    at::Tensor s = at::empty(t.sizes(), t.options().memory_format(at::MemoryFormat::Contiguous));
    w.keep(s);
    w.stageIn(s, t, &r);
    return s;
}

ProcessGroupHcomm::WorkPtr ProcessGroupHcomm::recvAnysource(std::vector<at::Tensor> &, int)
{
    TORCH_CHECK(false, "hcomm backend: receiving from any source is not supported: hcomm matches "
                       "point-to-point messages by their source rank");
}

} // namespace hcomm_torch
