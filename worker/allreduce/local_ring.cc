#include "worker/allreduce/local_ring.h"

#include <atomic>
#include <map>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

namespace ps {
namespace {

std::string MemberName(int rank) { return absl::StrCat("worker:", rank, " (in-process)"); }

// What the links of one ring share: every member's inbox, under one lock.
class LocalRing {
 public:
  explicit LocalRing(int size) : size_(size), members_(size) {}

  // Fixed at construction, so read without the lock.
  int size() const { return size_; }

  // Puts `data` into member `to`'s inbox as message `tag` from member `from`.
  absl::Status Deliver(int from, int to, uint64_t tag, absl::Span<const float> data)
      ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    if (!members_[from].aborted.ok()) return members_[from].aborted;
    Member& member = members_[to];
    if (member.closed) {
      return absl::UnavailableError(absl::StrCat(MemberName(to), " is gone (its link was closed)",
                                                 "; sending ring message ", tag, " to it failed"));
    }
    if (!member.aborted.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat(MemberName(to), " gave up on the ring (", member.aborted.ToString(),
                       "); sending ring message ", tag, " to it failed"));
    }
    auto [it, inserted] = member.inbox.try_emplace(tag, data.begin(), data.end());
    if (!inserted) {
      return absl::InternalError(absl::StrCat("ring message ", tag, " was sent to ", MemberName(to),
                                              " twice: tags must be distinct"));
    }
    return absl::OkStatus();
  }

  // Waits for message `tag` of member `to`'s inbox, sent by `from`, and moves it into `out`.
  absl::Status Take(int to, int from, uint64_t tag, absl::Duration deadline, absl::Span<float> out)
      ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    std::map<uint64_t, std::vector<float>>& inbox = members_[to].inbox;
    const absl::Status& aborted = members_[to].aborted;
    const absl::Status& previous_gave_up = members_[to].previous_gave_up;
    auto arrived = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return inbox.count(tag) > 0 || members_[from].closed || !aborted.ok() ||
             !previous_gave_up.ok();
    };
    if (!mu_.AwaitWithTimeout(absl::Condition(&arrived), deadline)) {
      return absl::DeadlineExceededError(absl::StrCat(
          "waiting for ", MemberName(from), " to send ring message ", tag, ": nothing after ",
          absl::FormatDuration(deadline), " (is it slow, or stuck?)"));
    }
    if (!aborted.ok()) return aborted;
    if (!previous_gave_up.ok()) return previous_gave_up;
    auto it = inbox.find(tag);
    if (it == inbox.end()) {
      return absl::UnavailableError(absl::StrCat(MemberName(from),
                                                 " is gone (its link was closed) while waiting "
                                                 "for it to send ring message ",
                                                 tag));
    }
    std::vector<float> message = std::move(it->second);
    inbox.erase(it);
    if (message.size() != out.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("ring message ", tag, " from ", MemberName(from), " has ", message.size(),
                       " floats where ", out.size(), " were expected"));
    }
    std::copy(message.begin(), message.end(), out.begin());
    return absl::OkStatus();
  }

  void Close(int member) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    members_[member].closed = true;
    members_[member].inbox.clear();
  }

  // Member `member` gave up: its calls fail with `reason`, and the next member's Receive with
  // the news.
  void Abort(int member, const absl::Status& reason) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    if (!members_[member].aborted.ok()) return;
    members_[member].aborted = reason.ok() ? absl::CancelledError("aborted") : reason;
    members_[member].inbox.clear();
    Member& next = members_[(member + 1) % size()];
    if (next.previous_gave_up.ok()) {
      next.previous_gave_up = absl::FailedPreconditionError(
          absl::StrCat(MemberName(member), " gave up on the ring (", reason.ToString(), ")"));
    }
  }

 private:
  struct Member {
    std::map<uint64_t, std::vector<float>> inbox;
    bool closed = false;            // Its link was destroyed.
    absl::Status aborted;           // Why its link was aborted (RingLink::Abort), or OK.
    absl::Status previous_gave_up;  // Why the previous member's was, or OK.
  };

  const int size_;
  absl::Mutex mu_;
  std::vector<Member> members_ ABSL_GUARDED_BY(mu_);
};

class LocalRingLink final : public RingLink {
 public:
  LocalRingLink(std::shared_ptr<LocalRing> ring, int rank, absl::Duration deadline)
      : ring_(std::move(ring)), rank_(rank), deadline_(deadline) {}
  ~LocalRingLink() override { ring_->Close(rank_); }

  int rank() const override { return rank_; }
  int size() const override { return ring_->size(); }

  absl::Status Send(uint64_t tag, absl::Span<const float> data) override {
    absl::Status status = ring_->Deliver(rank_, (rank_ + 1) % size(), tag, data);
    if (status.ok()) bytes_sent_ += static_cast<int64_t>(data.size() * sizeof(float));
    return status;
  }

  absl::Status Receive(uint64_t tag, absl::Span<float> out) override {
    absl::Status status = ring_->Take(rank_, (rank_ + size() - 1) % size(), tag, deadline_, out);
    if (status.ok()) bytes_received_ += static_cast<int64_t>(out.size() * sizeof(float));
    return status;
  }

  void Abort(const absl::Status& reason) override { ring_->Abort(rank_, reason); }

  int64_t bytes_sent() const override { return bytes_sent_; }
  int64_t bytes_received() const override { return bytes_received_; }

 private:
  const std::shared_ptr<LocalRing> ring_;
  const int rank_;
  const absl::Duration deadline_;
  std::atomic<int64_t> bytes_sent_{0};
  std::atomic<int64_t> bytes_received_{0};
};

}  // namespace

std::vector<std::unique_ptr<RingLink>> MakeLocalRing(int size, absl::Duration deadline) {
  auto ring = std::make_shared<LocalRing>(size);
  std::vector<std::unique_ptr<RingLink>> links;
  for (int rank = 0; rank < size; ++rank) {
    links.push_back(std::make_unique<LocalRingLink>(ring, rank, deadline));
  }
  return links;
}

}  // namespace ps
