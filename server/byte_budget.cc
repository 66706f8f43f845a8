#include "server/byte_budget.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace ps {
namespace {

// A client that has not called for this long no longer takes a share of the request part.
constexpr absl::Duration kClientIdle = absl::Seconds(1);

std::string Mib(int64_t bytes) { return absl::StrCat((bytes + (1 << 20) - 1) >> 20, " MiB"); }

}  // namespace

std::shared_ptr<ByteBudget> ByteBudget::Create(int64_t budget_bytes, std::string server,
                                               DeadlineTimer* timer, Clock* clock) {
  return std::shared_ptr<ByteBudget>(
      new ByteBudget(std::max<int64_t>(0, budget_bytes), std::move(server), timer, clock));
}

ByteBudget::ByteBudget(int64_t budget_bytes, std::string server, DeadlineTimer* timer,
                       Clock* clock)
    : budget_(budget_bytes), server_(std::move(server)), timer_(timer), clock_(clock) {}

ByteBudget::~ByteBudget() {
  CancelWaiters(absl::UnavailableError(server_ + " is shutting down; retry once it is back"));
}

ByteBudget::Charge ByteBudget::Hold(int64_t bytes, bool buffer, const std::string& group) {
  if (!group.empty()) ++groups_[group];
  if (buffer) {
    buffer_bytes_ += bytes;
    ++buffers_;
  } else {
    request_bytes_ += bytes;
  }
  peak_bytes_ = std::max(peak_bytes_, buffer_bytes_ + request_bytes_);
  // The charge keeps the budget alive, so that it can always give its bytes back (the budget owns
  // no thread, so the last owner may be any thread).
  std::shared_ptr<ByteBudget> self = shared_from_this();
  return Charge(static_cast<void*>(this),
                [self, bytes, buffer, group](void*) { self->Give(bytes, buffer, group); });
}

void ByteBudget::Give(int64_t bytes, bool buffer, const std::string& group) {
  absl::MutexLock lock(&mu_);
  if (!group.empty() && --groups_[group] == 0) groups_.erase(group);
  if (buffer) {
    buffer_bytes_ -= bytes;
    --buffers_;
    LetInLocked();
  } else {
    request_bytes_ -= bytes;
  }
}

bool ByteBudget::RoomLocked(int64_t bytes) const {
  return buffers_ == 0 || buffer_bytes_ + bytes <= buffer_part();
}

ByteBudget::Charge ByteBudget::ChargeBuffer(int64_t bytes, const std::string& group) {
  if (!enabled()) return nullptr;
  absl::MutexLock lock(&mu_);
  return Hold(bytes, /*buffer=*/true, group);
}

ByteBudget::Charge ByteBudget::TryReserveBuffer(int64_t bytes, const std::string& group) {
  if (!enabled()) return nullptr;
  absl::MutexLock lock(&mu_);
  if (AdmittedLocked(group)) return Hold(0, /*buffer=*/false, group);
  if (!waiting_.empty() || !RoomLocked(bytes)) return nullptr;
  return Hold(bytes, /*buffer=*/true, group);
}

void ByteBudget::ResumeLocked(Waiter waiter, Charge charge) {
  wait_seconds_ += absl::ToDoubleSeconds(clock_->Now() - waiter.since);
  timer_->Schedule(absl::InfinitePast(),
                   [resume = std::move(waiter.resume), charge = std::move(charge)]() mutable {
                     resume(std::move(charge));
                   });
}

void ByteBudget::WaitForBuffer(const std::string& job, const std::string& group, int64_t bytes,
                               absl::Time deadline, Resume resume) {
  absl::MutexLock lock(&mu_);
  if (cancelled_) {
    timer_->Schedule(absl::InfinitePast(), [resume = std::move(resume)] {
      resume(absl::UnavailableError("the ps is shutting down; retry once it is back"));
    });
    return;
  }
  Waiter waiter;
  waiter.id = next_waiter_++;
  waiter.group = group;
  waiter.bytes = bytes;
  waiter.since = clock_->Now();
  waiter.resume = std::move(resume);
  ++waits_;
  if (AdmittedLocked(group)) {  // Since TryReserveBuffer.
    ResumeLocked(std::move(waiter), Hold(0, /*buffer=*/false, group));
    return;
  }
  const uint64_t id = waiter.id;
  waiting_[job].push_back(std::move(waiter));
  std::weak_ptr<ByteBudget> weak = weak_from_this();
  timer_->Schedule(deadline, [weak, job, id] {
    if (std::shared_ptr<ByteBudget> self = weak.lock()) self->TimeOut(job, id);
  });
  LetInLocked();  // The buffers may have gone since TryReserveBuffer.
}

void ByteBudget::LetInLocked() {
  while (!waiting_.empty()) {
    auto turn = waiting_.lower_bound(next_job_);
    if (turn == waiting_.end()) turn = waiting_.begin();
    std::deque<Waiter>& queue = turn->second;
    if (!RoomLocked(queue.front().bytes)) return;
    Waiter first = std::move(queue.front());
    queue.pop_front();
    const std::string group = first.group;
    Charge reservation = Hold(first.bytes, /*buffer=*/true, group);
    ResumeLocked(std::move(first), std::move(reservation));
    // The other chunks of its push pass after it (the same job's queue holds them).
    if (!group.empty()) {
      for (auto it = queue.begin(); it != queue.end();) {
        if (it->group != group) {
          ++it;
          continue;
        }
        ResumeLocked(std::move(*it), Hold(0, /*buffer=*/false, group));
        it = queue.erase(it);
      }
    }
    // The next job after this one has the next turn.
    next_job_ = turn->first + '\0';
    if (queue.empty()) waiting_.erase(turn);
  }
}

void ByteBudget::TimeOut(const std::string& job, uint64_t id) {
  Resume resume;
  absl::Status status;
  {
    absl::MutexLock lock(&mu_);
    auto queue = waiting_.find(job);
    if (queue == waiting_.end()) return;
    auto it = std::find_if(queue->second.begin(), queue->second.end(),
                           [id](const Waiter& waiter) { return waiter.id == id; });
    if (it == queue->second.end()) return;
    const absl::Duration waited = clock_->Now() - it->since;
    status = absl::UnavailableError(absl::StrCat(
        server_, " waited ", absl::FormatDuration(absl::Trunc(waited, absl::Milliseconds(1))),
        " for room for a push buffer of ", Mib(it->bytes), " of job \"", job, "\": ",
        HeldTextLocked(), "; retry (the client does), or raise ps_server --max_inflight_mb"));
    resume = std::move(it->resume);
    wait_seconds_ += absl::ToDoubleSeconds(waited);
    ++timeouts_;
    queue->second.erase(it);
    if (queue->second.empty()) waiting_.erase(queue);
  }
  resume(status);  // On the timer's thread already.
}

std::string ByteBudget::HeldTextLocked() const {
  return absl::StrCat(buffers_, " push buffers hold ", Mib(buffer_bytes_), " of its ",
                      Mib(buffer_part()), " for them");
}

void ByteBudget::CancelWaiters(const absl::Status& status) {
  std::vector<Resume> resumes;
  {
    absl::MutexLock lock(&mu_);
    cancelled_ = true;
    for (auto& [job, queue] : waiting_) {
      for (Waiter& waiter : queue) resumes.push_back(std::move(waiter.resume));
    }
    waiting_.clear();
  }
  for (Resume& resume : resumes) resume(status);
}

ByteBudget::Charge ByteBudget::ChargeRequest(int64_t bytes) {
  if (!enabled()) return nullptr;
  absl::MutexLock lock(&mu_);
  return Hold(bytes, /*buffer=*/false);
}

void ByteBudget::ForgetIdleClientsLocked(absl::Time now) {
  for (auto it = clients_.begin(); it != clients_.end();) {
    if (now - it->second.seen > kClientIdle) {
      it = clients_.erase(it);
    } else {
      ++it;
    }
  }
}

int64_t ByteBudget::Window(const std::string& client, const std::string& job) {
  if (!enabled()) return 0;
  absl::MutexLock lock(&mu_);
  const absl::Time now = clock_->Now();
  ForgetIdleClientsLocked(now);
  clients_[client] = Client{job, now};
  std::map<std::string, int> per_job;
  for (const auto& [id, seen] : clients_) ++per_job[seen.job];
  return std::max<int64_t>(
      1, request_part() / static_cast<int64_t>(per_job.size()) / per_job[job]);
}

ByteBudget::Stats ByteBudget::GetStats() {
  absl::MutexLock lock(&mu_);
  ForgetIdleClientsLocked(clock_->Now());
  Stats stats;
  stats.buffer_bytes = buffer_bytes_;
  stats.request_bytes = request_bytes_;
  stats.peak_bytes = peak_bytes_;
  for (const auto& [job, queue] : waiting_) stats.waiting += static_cast<int>(queue.size());
  stats.waits = waits_;
  stats.timeouts = timeouts_;
  stats.wait_seconds = wait_seconds_;
  stats.clients = static_cast<int>(clients_.size());
  std::map<std::string, int> jobs;
  for (const auto& [id, client] : clients_) ++jobs[client.job];
  stats.jobs = static_cast<int>(jobs.size());
  return stats;
}

void ByteBudget::WriteMetrics(MetricsWriter* writer, const MetricLabels& labels) {
  if (!enabled()) return;
  const Stats stats = GetStats();
  auto gauge = [&](const char* name, const char* help, double value) {
    writer->Family(name, help, MetricType::kGauge);
    writer->Sample(name, labels, value);
  };
  auto counter = [&](const char* name, const char* help, double value) {
    writer->Family(name, help, MetricType::kCounter);
    writer->Sample(name, labels, value);
  };
  gauge("ps_byte_budget_bytes", "The bytes of pushes this ps holds at most (--max_inflight_mb).",
        static_cast<double>(budget_));
  gauge("ps_byte_budget_buffer_bytes", "Bytes held by push buffers being filled or applied.",
        static_cast<double>(stats.buffer_bytes));
  gauge("ps_byte_budget_request_bytes", "Bytes of push requests received and not yet answered.",
        static_cast<double>(stats.request_bytes));
  gauge("ps_byte_budget_peak_bytes", "The most bytes held by push buffers and requests at once.",
        static_cast<double>(stats.peak_bytes));
  gauge("ps_byte_budget_waiting_calls", "Push calls parked now until a push buffer fits.",
        stats.waiting);
  gauge("ps_byte_budget_clients", "Clients that called in the last second, sharing windows.",
        stats.clients);
  counter("ps_byte_budget_waits_total", "Push calls parked until a push buffer fitted.",
          static_cast<double>(stats.waits));
  counter("ps_byte_budget_wait_timeouts_total",
          "Parked push calls answered UNAVAILABLE at their deadline.",
          static_cast<double>(stats.timeouts));
  counter("ps_byte_budget_wait_seconds_total", "Time push calls spent parked, together.",
          stats.wait_seconds);
}

}  // namespace ps
