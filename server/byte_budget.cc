#include "server/byte_budget.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/mib_text.h"

namespace ps {
namespace {

}  // namespace

std::shared_ptr<ByteBudget> ByteBudget::Create(int64_t budget_bytes, std::string server,
                                               DeadlineTimer* timer, Executor executor,
                                               Clock* clock) {
  return std::shared_ptr<ByteBudget>(new ByteBudget(
      std::max<int64_t>(0, budget_bytes), std::move(server), timer, std::move(executor), clock));
}

ByteBudget::ByteBudget(int64_t budget_bytes, std::string server, DeadlineTimer* timer,
                       Executor executor, Clock* clock)
    : budget_(budget_bytes),
      server_(std::move(server)),
      timer_(timer),
      executor_(std::move(executor)),
      clock_(clock) {}

ByteBudget::~ByteBudget() {
  CancelWaiters(absl::UnavailableError(server_ + " is shutting down; retry once it is back"));
}

void ByteBudget::Run(After after) {
  for (uint64_t handle : after.cancel) timer_->Cancel(handle);
  for (std::function<void()>& resume : after.resumes) executor_(std::move(resume));
}

ByteBudget::Charge ByteBudget::Hold(int64_t bytes, Kind kind, const std::string& group,
                                    int64_t counted) {
  if (!group.empty()) ++groups_[group];
  if (kind == Kind::kReservation && !group.empty()) reserved_[group] += bytes;
  if (kind == Kind::kBuffer || kind == Kind::kReservation) {
    buffer_bytes_ += bytes - counted;
    ++buffers_;
  } else {
    request_bytes_ += bytes;
  }
  peak_bytes_ = std::max(peak_bytes_, buffer_bytes_ + request_bytes_);
  // The charge keeps the budget alive, so that it can always give its bytes back (the budget owns
  // no thread, so the last owner may be any thread).
  std::shared_ptr<ByteBudget> self = shared_from_this();
  return Charge(static_cast<void*>(this),
                [self, bytes, kind, group](void*) { self->Give(bytes, kind, group); });
}

void ByteBudget::Give(int64_t bytes, Kind kind, const std::string& group) {
  After after;
  {
    absl::MutexLock lock(&mu_);
    if (!group.empty() && --groups_[group] == 0) groups_.erase(group);
    // A reservation gives back what no buffer took over of it (ChargeBuffer).
    if (kind == Kind::kReservation && !group.empty()) bytes = TakeReservedLocked(group, bytes);
    if (kind == Kind::kBuffer || kind == Kind::kReservation) {
      buffer_bytes_ -= bytes;
      --buffers_;
      LetInLocked(&after);
    } else {
      request_bytes_ -= bytes;
    }
  }
  Run(std::move(after));
}

bool ByteBudget::RoomLocked(int64_t bytes) const {
  return buffers_ == 0 || buffer_bytes_ + bytes <= buffer_part();
}

ByteBudget::Charge ByteBudget::ChargeBuffer(int64_t bytes, const std::string& group) {
  if (!enabled()) return nullptr;
  absl::MutexLock lock(&mu_);
  // The bytes its group's reservation counted already are the buffer's from now on.
  return Hold(bytes, Kind::kBuffer, group, TakeReservedLocked(group, bytes));
}

int64_t ByteBudget::TakeReservedLocked(const std::string& group, int64_t bytes) {
  auto reserved = reserved_.find(group);
  if (reserved == reserved_.end()) return 0;
  const int64_t taken = std::min(bytes, reserved->second);
  if ((reserved->second -= taken) == 0) reserved_.erase(reserved);
  return taken;
}

ByteBudget::Charge ByteBudget::TryReserveBuffer(int64_t bytes, const std::string& group) {
  if (!enabled()) return nullptr;
  absl::MutexLock lock(&mu_);
  if (AdmittedLocked(group)) return Hold(0, Kind::kPass, group);
  if (!waiting_.empty() || !RoomLocked(bytes)) return nullptr;
  return Hold(bytes, Kind::kReservation, group);
}

void ByteBudget::UnparkLocked(const Waiter& waiter) {
  if (waiter.client.empty()) return;
  auto it = clients_.find(waiter.client);
  if (it == clients_.end()) return;
  --it->second.parked;
  it->second.seen = clock_->Now();
}

void ByteBudget::ResumeLocked(Waiter waiter, Charge charge, After* after) {
  UnparkLocked(waiter);
  wait_seconds_ += absl::ToDoubleSeconds(clock_->Now() - waiter.since);
  if (waiter.timeout != 0) after->cancel.push_back(waiter.timeout);
  after->resumes.push_back(
      [resume = std::move(waiter.resume), charge = std::move(charge)]() mutable {
        resume(std::move(charge));
      });
}

void ByteBudget::WaitForBuffer(const std::string& job, const std::string& client,
                               const std::string& group, int64_t bytes, absl::Time deadline,
                               Resume resume) {
  After after;
  uint64_t id = 0;
  {
    absl::MutexLock lock(&mu_);
    if (cancelled_) {
      after.resumes.push_back([resume = std::move(resume)] {
        resume(absl::UnavailableError("the ps is shutting down; retry once it is back"));
      });
    } else {
      Waiter waiter;
      waiter.id = next_waiter_++;
      waiter.group = group;
      waiter.bytes = bytes;
      waiter.since = clock_->Now();
      waiter.resume = std::move(resume);
      if (!client.empty()) {
        const std::string name = client.substr(0, kMaxClientId);
        if (Client* noted = NoteClientLocked(name, job); noted != nullptr) {
          ++noted->parked;
          waiter.client = name;
        }
      }
      ++waits_;
      if (AdmittedLocked(group)) {  // Since TryReserveBuffer.
        ResumeLocked(std::move(waiter), Hold(0, Kind::kPass, group), &after);
      } else {
        id = waiter.id;
        waiting_[job].push_back(std::move(waiter));
        LetInLocked(&after);  // The buffers may have gone since TryReserveBuffer.
      }
    }
  }
  Run(std::move(after));
  if (id == 0) return;
  // Its deadline, once mu_ is released (the timer's lock is never taken under it). A waiter let
  // in meanwhile has its deadline cancelled here.
  std::weak_ptr<ByteBudget> weak = weak_from_this();
  const uint64_t timeout = timer_->Schedule(deadline, [weak, job, id] {
    if (std::shared_ptr<ByteBudget> self = weak.lock()) self->TimeOut(job, id);
  });
  absl::MutexLock lock(&mu_);
  auto queue = waiting_.find(job);
  if (queue != waiting_.end()) {
    for (Waiter& waiter : queue->second) {
      if (waiter.id == id) {
        waiter.timeout = timeout;
        return;
      }
    }
  }
  timer_->Cancel(timeout);  // Let in already. The timer's callbacks never take mu_ but TimeOut's.
}

void ByteBudget::LetInLocked(After* after) {
  while (!waiting_.empty()) {
    auto turn = waiting_.lower_bound(next_job_);
    if (turn == waiting_.end()) turn = waiting_.begin();
    std::deque<Waiter>& queue = turn->second;
    if (!RoomLocked(queue.front().bytes)) return;
    Waiter first = std::move(queue.front());
    queue.pop_front();
    const std::string group = first.group;
    Charge reservation = Hold(first.bytes, Kind::kReservation, group);
    ResumeLocked(std::move(first), std::move(reservation), after);
    // The other chunks of its push pass after it (the same job's queue holds them).
    if (!group.empty()) {
      for (auto it = queue.begin(); it != queue.end();) {
        if (it->group != group) {
          ++it;
          continue;
        }
        ResumeLocked(std::move(*it), Hold(0, Kind::kPass, group), after);
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
        " for room for a push buffer of ", MibText(it->bytes), " of job \"", job, "\": ",
        HeldTextLocked(), "; retry (the client does), or raise ps_server --max_inflight_mb"));
    resume = std::move(it->resume);
    UnparkLocked(*it);
    wait_seconds_ += absl::ToDoubleSeconds(waited);
    ++timeouts_;
    queue->second.erase(it);
    if (queue->second.empty()) waiting_.erase(queue);
  }
  resume(status);  // On the timer's thread: answering takes no time.
}

std::string ByteBudget::HeldTextLocked() const {
  return absl::StrCat(buffers_, " push buffers hold ", MibText(buffer_bytes_), " of its ",
                      MibText(buffer_part()), " for them");
}

void ByteBudget::CancelWaiters(const absl::Status& status) {
  std::vector<Resume> resumes;
  std::vector<uint64_t> timeouts;
  {
    absl::MutexLock lock(&mu_);
    cancelled_ = true;
    for (auto& [job, queue] : waiting_) {
      for (Waiter& waiter : queue) {
        UnparkLocked(waiter);
        resumes.push_back(std::move(waiter.resume));
        if (waiter.timeout != 0) timeouts.push_back(waiter.timeout);
      }
    }
    waiting_.clear();
  }
  for (uint64_t handle : timeouts) timer_->Cancel(handle);
  for (Resume& resume : resumes) resume(status);
}

ByteBudget::Charge ByteBudget::ChargeRequest(int64_t bytes) {
  if (!enabled()) return nullptr;
  absl::MutexLock lock(&mu_);
  return Hold(bytes, Kind::kRequest);
}

void ByteBudget::ForgetIdleClientsLocked(absl::Time now, bool always) {
  if (!always && now - swept_ < kClientIdle / 10) return;
  swept_ = now;
  for (auto it = clients_.begin(); it != clients_.end();) {
    if (it->second.parked > 0 || now - it->second.seen <= kClientIdle) {
      ++it;
      continue;
    }
    if (--clients_per_job_[it->second.job] == 0) clients_per_job_.erase(it->second.job);
    it = clients_.erase(it);
  }
}

ByteBudget::Client* ByteBudget::NoteClientLocked(const std::string& client,
                                                 const std::string& job) {
  const absl::Time now = clock_->Now();
  ForgetIdleClientsLocked(now);
  auto it = clients_.find(client);
  if (it == clients_.end()) {
    if (clients_.size() >= kMaxClients) return nullptr;
    it = clients_.emplace(client, Client{job, now}).first;
    ++clients_per_job_[job];
  } else if (it->second.job != job) {
    if (--clients_per_job_[it->second.job] == 0) clients_per_job_.erase(it->second.job);
    ++clients_per_job_[job];
    it->second.job = job;
  }
  it->second.seen = now;
  return &it->second;
}

int64_t ByteBudget::Window(const std::string& client_id, const std::string& job) {
  if (!enabled()) return 0;
  absl::MutexLock lock(&mu_);
  if (NoteClientLocked(client_id.substr(0, kMaxClientId), job) == nullptr) return 1;
  return std::max<int64_t>(1, request_part() / static_cast<int64_t>(clients_per_job_.size()) /
                                  clients_per_job_[job]);
}

ByteBudget::Stats ByteBudget::GetStats() {
  absl::MutexLock lock(&mu_);
  ForgetIdleClientsLocked(clock_->Now(), /*always=*/true);
  Stats stats;
  stats.buffer_bytes = buffer_bytes_;
  stats.request_bytes = request_bytes_;
  stats.peak_bytes = peak_bytes_;
  for (const auto& [job, queue] : waiting_) stats.waiting += static_cast<int>(queue.size());
  stats.waits = waits_;
  stats.timeouts = timeouts_;
  stats.wait_seconds = wait_seconds_;
  stats.clients = static_cast<int>(clients_.size());
  stats.jobs = static_cast<int>(clients_per_job_.size());
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
  gauge("ps_byte_budget_clients", "Clients that called in the last 5 seconds, sharing windows.",
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
