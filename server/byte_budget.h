// The bytes of pushes one ps holds at once, across all its jobs and connections (ps_server
// --max_inflight_mb): a bound on the memory that workers' traffic makes a ps hold, beyond the
// jobs' own values and slots (ServiceLimits). It has two parts.
//
// - Push buffers, three quarters of the budget: a push's gradient decoded on its shard, held from
//   its first chunk until it is applied (ShardJob charges each buffer it takes, ChargeBuffer).
//   A call that would start a new buffer first reserves its bytes (TryReserveBuffer); when the
//   buffers held leave no room, the call is parked without holding a thread (WaitForBuffer) and
//   let in as buffers are freed, the jobs with calls waiting taking turns. A buffer larger than
//   this part is let in alone.
// - Requests, the other quarter: the bytes of push calls received and not yet answered
//   (ChargeRequest). The ps cannot refuse bytes already sent, so it tells every client how much
//   to keep in flight to it (Window, sent back on every data call as the trailing metadata
//   "ps-window-bytes"): this part shared equally between the jobs whose clients called in the
//   last kClientIdle, and within a job between its clients. Clients name themselves in the
//   metadata "ps-client-id" (common/client/ps_connections.h keeps to its window).
//
// So a ps holds at most the budget in push buffers and requests, plus what clients have in flight
// while their windows shrink, plus one push of each client that has no window yet, from clients
// that keep to their windows; a client that does not is bounded only by --max_requests_per_peer.
// Not counted: a replicated push's copy for its backup, and the backup's inputs. Metrics:
// WriteMetrics (docs/REFERENCE.md, "Metrics").
#ifndef PS_SERVER_BYTE_BUDGET_H_
#define PS_SERVER_BYTE_BUDGET_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/metrics/metrics.h"
#include "server/deadline_timer.h"

namespace ps {

// Thread-safe. Charges and reservations keep the budget alive; its timer and executor must
// outlive its parked calls (CancelWaiters first).
class ByteBudget : public std::enable_shared_from_this<ByteBudget> {
 public:
  // What the caller holds until it drops it: the bytes go back to the budget then. Null when the
  // budget is off.
  using Charge = std::shared_ptr<void>;
  // A parked call's answer: its reservation, or UNAVAILABLE when it waited until `deadline`.
  using Resume = std::function<void(absl::StatusOr<Charge>)>;
  // Runs work on some thread other than the caller's, soon.
  using Executor = std::function<void(std::function<void()>)>;

  // `budget_bytes` 0: no budget (every reservation granted at once, no window sent). `server`
  // ("ps:0") names this ps in messages. Parked calls resume through `executor`, and time out on
  // `timer`'s thread (not owned), whose clock `clock` is.
  static std::shared_ptr<ByteBudget> Create(int64_t budget_bytes, std::string server,
                                            DeadlineTimer* timer, Executor executor,
                                            Clock* clock = Clock::Real());
  ~ByteBudget();

  bool enabled() const { return budget_ > 0; }
  int64_t budget_bytes() const { return budget_; }
  int64_t buffer_part() const { return budget_ - budget_ / 4; }
  int64_t request_part() const { return budget_ / 4; }

  // Every call of one push names the same `group` (ShardJob::PushGroup: its chunks, or a whole
  // push and its retries; "" for a whole push without a push id). From the moment one call of a
  // group is let in until the push's buffer is freed, the group is admitted: its other calls
  // pass at once, without room, since they fill the buffer admitted (were a chunk to wait for
  // room, the push could never be applied to free it).

  // A push buffer of `bytes` now held, whatever the room (one a reservation made room for). The
  // bytes that `group`'s reservations hold are the buffer's from now on, not counted twice.
  // A push of group "" is counted twice while both are held: its reservation is dropped right
  // after the push is decoded, so that is a decode's length.
  Charge ChargeBuffer(int64_t bytes, const std::string& group) ABSL_LOCKS_EXCLUDED(mu_);
  // Room for a new push buffer of `bytes`, reserved until the charge is dropped (a pass of 0
  // bytes when `group` is admitted); null when there is no room now or calls are parked before
  // it (then call WaitForBuffer), and when the budget is off.
  Charge TryReserveBuffer(int64_t bytes, const std::string& group) ABSL_LOCKS_EXCLUDED(mu_);
  // Parks a call that found no room: `resume` runs once with the reservation when there is room
  // and its turn comes, or with UNAVAILABLE at `deadline` (saying what it waited for), or when
  // the budget is cancelled (CancelWaiters). It runs through the executor (the timer's thread
  // for a timeout), never inside this call.
  // A parked chunk whose group another chunk's admission admits resumes with a pass.
  // `client` (as for Window; "" for none) stays active while the call is parked: its clients'
  // share of the request part does not go to the others meanwhile.
  void WaitForBuffer(const std::string& job, const std::string& client, const std::string& group,
                     int64_t bytes, absl::Time deadline, Resume resume) ABSL_LOCKS_EXCLUDED(mu_);
  // Ends every parked call with `status`, on this thread, and parks no more (the ps is shutting
  // down).
  void CancelWaiters(const absl::Status& status) ABSL_LOCKS_EXCLUDED(mu_);

  // The bytes of a push call just received, held until the call is answered.
  Charge ChargeRequest(int64_t bytes) ABSL_LOCKS_EXCLUDED(mu_);
  // How many bytes `client`, working for `job`, may keep in flight to this ps from now on
  // (the "ps-window-bytes" it is sent); at least 1. Notes the client as active. An id longer
  // than kMaxClientId is cut; past kMaxClients active clients a new one gets the least share
  // and is not noted.
  int64_t Window(const std::string& client, const std::string& job) ABSL_LOCKS_EXCLUDED(mu_);

  struct Stats {
    int64_t buffer_bytes = 0;   // Held by push buffers and reservations now.
    int64_t request_bytes = 0;  // Of requests being handled now.
    int64_t peak_bytes = 0;     // The most of both together so far.
    int waiting = 0;            // Calls parked now.
    int64_t waits = 0;          // Calls parked so far.
    int64_t timeouts = 0;       // Of those, ended UNAVAILABLE at their deadline.
    double wait_seconds = 0;    // Their time parked, together.
    int clients = 0;            // Active in the last kClientIdle.
    int jobs = 0;               // Of the active clients.
  };
  Stats GetStats() ABSL_LOCKS_EXCLUDED(mu_);
  // The budget's gauges and counters (ps_byte_budget_*), each one sample with `labels`; none
  // when the budget is off.
  void WriteMetrics(MetricsWriter* writer, const MetricLabels& labels) ABSL_LOCKS_EXCLUDED(mu_);

  // A client quiet for this long no longer takes a share of the request part.
  static constexpr absl::Duration kClientIdle = absl::Seconds(5);
  static constexpr size_t kMaxClientId = 64;
  static constexpr size_t kMaxClients = 16384;

 private:
  struct Waiter {
    uint64_t id = 0;
    std::string client;  // Noted in clients_ while parked; "" for none.
    std::string group;
    int64_t bytes = 0;
    absl::Time since;
    Resume resume;
    uint64_t timeout = 0;  // Its deadline's handle on the timer; 0 until scheduled.
  };
  // What to do once mu_ is released: resumes for the executor, timeouts to cancel. Charges are
  // never dropped under mu_ (their release takes it).
  struct After {
    std::vector<std::function<void()>> resumes;
    std::vector<uint64_t> cancel;
  };
  struct Client {
    std::string job;
    absl::Time seen;
    int parked = 0;  // Its calls parked now: not idle while any is.
  };

  ByteBudget(int64_t budget_bytes, std::string server, DeadlineTimer* timer, Executor executor,
             Clock* clock);
  void Run(After after);
  enum class Kind {
    kRequest,      // Bytes of a call being handled.
    kPass,         // No bytes: a chunk of an admitted push.
    kReservation,  // Room for a push buffer, which takes its bytes over once charged.
    kBuffer,       // A push buffer.
  };
  // `group`, when not empty, is admitted while the charge is held. `counted` of the `bytes` are
  // counted already (taken over from the group's reservations); the charge gives back `bytes`
  // (a reservation: what no buffer took over of them).
  Charge Hold(int64_t bytes, Kind kind, const std::string& group = "", int64_t counted = 0)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Give(int64_t bytes, Kind kind, const std::string& group) ABSL_LOCKS_EXCLUDED(mu_);
  bool AdmittedLocked(const std::string& group) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !group.empty() && groups_.count(group) > 0;
  }
  // Takes up to `bytes` out of `group`'s reservations not yet taken over (reserved_); how many.
  int64_t TakeReservedLocked(const std::string& group, int64_t bytes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Notes `client` active for `job` now (Window's bookkeeping); the entry, or null past
  // kMaxClients.
  Client* NoteClientLocked(const std::string& client, const std::string& job)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A parked call of `waiter`'s client is no longer parked (let in, timed out or cancelled).
  void UnparkLocked(const Waiter& waiter) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Resumes `waiter` with `charge` once mu_ is released.
  void ResumeLocked(Waiter waiter, Charge charge, After* after) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool RoomLocked(int64_t bytes) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Lets in the waiters there is room for, the jobs taking turns; their resumes go to the timer.
  void LetInLocked(After* after) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void TimeOut(const std::string& job, uint64_t id) ABSL_LOCKS_EXCLUDED(mu_);
  // At most every tenth of kClientIdle.
  void ForgetIdleClientsLocked(absl::Time now, bool always = false)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::string HeldTextLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int64_t budget_;
  const std::string server_;
  // Runs resumes and deadlines off the callers' threads (a charge may be dropped under a
  // shard's lock).
  DeadlineTimer* const timer_;
  const Executor executor_;
  Clock* const clock_;

  absl::Mutex mu_;
  int64_t buffer_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t request_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t peak_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  int buffers_ ABSL_GUARDED_BY(mu_) = 0;  // Push buffers and reservations held.
  // Parked calls by job, in arrival order; `next_job_` is the job whose turn is next.
  std::map<std::string, std::deque<Waiter>> waiting_ ABSL_GUARDED_BY(mu_);
  std::string next_job_ ABSL_GUARDED_BY(mu_);
  uint64_t next_waiter_ ABSL_GUARDED_BY(mu_) = 1;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  int64_t waits_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t timeouts_ ABSL_GUARDED_BY(mu_) = 0;
  double wait_seconds_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::string, Client> clients_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, int> clients_per_job_ ABSL_GUARDED_BY(mu_);  // Of clients_.
  absl::Time swept_ ABSL_GUARDED_BY(mu_);  // When idle clients were last forgotten.
  std::map<std::string, int> groups_ ABSL_GUARDED_BY(mu_);  // Admitted: charges held.
  // Per group, the bytes of its reservations that no buffer has taken over yet.
  std::map<std::string, int64_t> reserved_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ps

#endif  // PS_SERVER_BYTE_BUDGET_H_
