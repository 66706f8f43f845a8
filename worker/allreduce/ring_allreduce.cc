#include "worker/allreduce/ring_allreduce.h"

#include <algorithm>
#include <deque>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

namespace ps {
namespace {

// A tag is (step << kMessageBits) | message, message numbering the call's pieces.
constexpr int kMessageBits = 24;
constexpr uint64_t kMaxStep = uint64_t{1} << 40;

// Where the chunks and their pieces lie in the data (the chunking rule in the header).
class RingLayout {
 public:
  RingLayout(int64_t length, int size, int64_t piece_floats)
      : length_(length), size_(size), piece_floats_(piece_floats) {}

  int64_t ChunkSize(int chunk) const { return length_ / size_ + (chunk < length_ % size_); }
  int64_t ChunkStart(int chunk) const {
    return chunk * (length_ / size_) + std::min<int64_t>(chunk, length_ % size_);
  }
  int64_t Pieces(int chunk) const { return (ChunkSize(chunk) + piece_floats_ - 1) / piece_floats_; }
  // The most pieces a chunk has (chunk 0 is a largest).
  int64_t MaxPieces() const { return Pieces(0); }
  absl::Span<float> Piece(absl::Span<float> data, int chunk, int64_t piece) const {
    const int64_t begin = piece * piece_floats_;
    return data.subspan(ChunkStart(chunk) + begin,
                        std::min(piece_floats_, ChunkSize(chunk) - begin));
  }

 private:
  const int64_t length_;
  const int size_;
  const int64_t piece_floats_;
};

// Sends the pieces queued to it, in order, keeping at most `max_in_flight` sends in flight
// through RingLink::SendAsync (the next piece starts from the thread that ends a send). The
// pieces' memory must stay unchanged until they are sent (AwaitStep, AwaitAll). The destructor
// stops taking pieces and waits for the sends in flight (each ends by the link's deadline, or
// at once once the link is aborted).
class PieceSender {
 public:
  PieceSender(RingLink* link, int max_in_flight, int ring_steps)
      : state_(std::make_shared<State>(link, max_in_flight, ring_steps)) {}
  ~PieceSender() {
    State& state = *state_;
    absl::MutexLock lock(&state.mu);
    state.stopping = true;
    auto idle = [&state]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(state.mu) { return state.in_flight == 0; };
    state.mu.Await(absl::Condition(&idle));
  }

  void Queue(int ring_step, uint64_t tag, absl::Span<const float> piece) {
    {
      absl::MutexLock lock(&state_->mu);
      state_->queue.push_back({ring_step, tag, piece});
      ++state_->unsent[ring_step];
      ++state_->total_unsent;
    }
    Pump(state_);
  }
  // The first send's error, if any.
  absl::Status error() {
    absl::MutexLock lock(&state_->mu);
    return state_->error;
  }
  // Waits until every piece queued for `ring_step` so far is sent, or a send failed.
  absl::Status AwaitStep(int ring_step) {
    State& state = *state_;
    absl::MutexLock lock(&state.mu);
    auto done = [&state, ring_step]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(state.mu) {
      return state.unsent[ring_step] == 0 || !state.error.ok();
    };
    state.mu.Await(absl::Condition(&done));
    return state.error;
  }
  // Waits until every piece queued is sent, or a send failed.
  absl::Status AwaitAll() {
    State& state = *state_;
    absl::MutexLock lock(&state.mu);
    auto done = [&state]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(state.mu) {
      return state.total_unsent == 0 || !state.error.ok();
    };
    state.mu.Await(absl::Condition(&done));
    return state.error;
  }

 private:
  struct Piece {
    int ring_step;
    uint64_t tag;
    absl::Span<const float> data;
  };
  // Shared with the sends' callbacks, which may run after the sender is gone.
  struct State {
    State(RingLink* link, int max_in_flight, int ring_steps)
        : link(link), max_in_flight(max_in_flight), unsent(ring_steps) {}
    RingLink* const link;
    const int max_in_flight;

    absl::Mutex mu;
    std::deque<Piece> queue ABSL_GUARDED_BY(mu);
    std::vector<int64_t> unsent ABSL_GUARDED_BY(mu);  // Queued, not yet sent, per ring step.
    int64_t total_unsent ABSL_GUARDED_BY(mu) = 0;
    int in_flight ABSL_GUARDED_BY(mu) = 0;
    bool pumping ABSL_GUARDED_BY(mu) = false;  // A thread is in Pump's loop.
    absl::Status error ABSL_GUARDED_BY(mu);
    bool stopping ABSL_GUARDED_BY(mu) = false;
  };

  // Starts queued pieces while fewer than max_in_flight are in flight, unless another thread
  // already does (a send that ends inside SendAsync then only counts itself here).
  static void Pump(const std::shared_ptr<State>& state) {
    absl::MutexLock lock(&state->mu);
    if (state->pumping) return;
    state->pumping = true;
    while (!state->stopping && state->error.ok() && !state->queue.empty() &&
           state->in_flight < state->max_in_flight) {
      const Piece piece = state->queue.front();
      state->queue.pop_front();
      ++state->in_flight;
      // Released by hand (clang's analysis checks the pair, --config=thread_safety): a send
      // that ends at once runs its callback here, which takes the lock.
      state->mu.Unlock();
      state->link->SendAsync(piece.tag, piece.data, [state, piece](absl::Status sent) {
        if (!sent.ok()) state->link->Abort(sent);  // Ends the caller's Receive at once.
        {
          absl::MutexLock lock(&state->mu);
          if (!sent.ok() && state->error.ok()) state->error = sent;
          --state->in_flight;
          --state->unsent[piece.ring_step];
          --state->total_unsent;
        }
        Pump(state);
      });
      state->mu.Lock();
    }
    state->pumping = false;
  }

  const std::shared_ptr<State> state_;
};

// The call's error once a Receive failed with `received`: a send's failure, which aborts the
// link and so ends the Receive, comes first.
absl::Status FailReceive(RingLink* link, PieceSender* sender, const absl::Status& received) {
  if (absl::Status sent = sender->error(); !sent.ok()) return sent;
  link->Abort(received);
  return received;
}

absl::Status ValidateCall(uint64_t step, const RingOptions& options) {
  if (options.piece_bytes < static_cast<int64_t>(sizeof(float))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "RingOptions.piece_bytes is ", options.piece_bytes, "; it must be at least 4 (one float)"));
  }
  if (options.sends_in_flight < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "RingOptions.sends_in_flight is ", options.sends_in_flight, "; it must be at least 1"));
  }
  if (step >= kMaxStep) {
    return absl::InvalidArgumentError(
        absl::StrCat("ring all-reduce step ", step, " is out of range: it must be below 2^40"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status RingAllReduceMean(RingLink* link, uint64_t step, absl::Span<float> data,
                               const RingOptions& options) {
  if (absl::Status valid = ValidateCall(step, options); !valid.ok()) return valid;
  const int n = link->size();
  if (n == 1 || data.empty()) return absl::OkStatus();
  const int64_t piece_floats = options.piece_bytes / static_cast<int64_t>(sizeof(float));
  const RingLayout layout(data.size(), n, piece_floats);
  const int ring_steps = 2 * (n - 1);
  const int64_t max_pieces = layout.MaxPieces();
  if (ring_steps * max_pieces >= (int64_t{1} << kMessageBits)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a ring all-reduce of ", data.size(), " floats over ", n, " members in pieces of ",
        options.piece_bytes, " bytes takes over 2^24 messages; raise RingOptions.piece_bytes"));
  }
  auto tag = [&](int ring_step, int64_t piece) {
    return (step << kMessageBits) | static_cast<uint64_t>(ring_step * max_pieces + piece);
  };
  const int rank = link->rank();
  auto chunk_at = [&](int offset) { return ((rank + offset) % n + n) % n; };

  PieceSender sender(link, options.sends_in_flight, ring_steps);
  std::vector<float> received(std::min(piece_floats, layout.ChunkSize(0)));
  // Reduce-scatter: at step s, send chunk rank - s and receive chunk rank - s - 1, each piece
  // passed on (step s + 1) as soon as it is added to. The last step's chunk, rank + 1, is then
  // the whole sum: its mean goes out as the first step of the all-gather (ring step n - 1).
  for (int64_t piece = 0; piece < layout.Pieces(chunk_at(0)); ++piece) {
    sender.Queue(0, tag(0, piece), layout.Piece(data, chunk_at(0), piece));
  }
  for (int s = 0; s < n - 1; ++s) {
    const int chunk = chunk_at(-s - 1);
    for (int64_t piece = 0; piece < layout.Pieces(chunk); ++piece) {
      absl::Span<float> into = layout.Piece(data, chunk, piece);
      if (absl::Status sent = sender.error(); !sent.ok()) return sent;
      absl::Status status =
          link->Receive(tag(s, piece), absl::MakeSpan(received.data(), into.size()));
      if (!status.ok()) return FailReceive(link, &sender, status);
      for (size_t i = 0; i < into.size(); ++i) into[i] += received[i];
      if (s == n - 2) {
        for (float& value : into) value /= static_cast<float>(n);
      }
      sender.Queue(s + 1, tag(s + 1, piece), into);
    }
  }
  // All-gather: at step s (ring step n - 1 + s), receive the mean of chunk rank - s, copied in
  // place and passed on, but for the last step's. That chunk went out at reduce-scatter step s:
  // those sends must be done before it is overwritten.
  for (int s = 0; s < n - 1; ++s) {
    const int chunk = chunk_at(-s);
    if (absl::Status sent = sender.AwaitStep(s); !sent.ok()) return sent;
    for (int64_t piece = 0; piece < layout.Pieces(chunk); ++piece) {
      absl::Span<float> into = layout.Piece(data, chunk, piece);
      if (absl::Status sent = sender.error(); !sent.ok()) return sent;
      absl::Status status = link->Receive(tag(n - 1 + s, piece), into);
      if (!status.ok()) return FailReceive(link, &sender, status);
      if (s < n - 2) sender.Queue(n + s, tag(n + s, piece), into);
    }
  }
  return sender.AwaitAll();
}

RingTraffic RingAllReduceTraffic(int64_t length, int size, int rank) {
  if (size <= 1) return {};
  const RingLayout layout(length, size, 1);
  auto chunk = [&](int offset) { return layout.ChunkSize((rank + offset) % size); };
  constexpr int64_t kFloat = sizeof(float);
  return {kFloat * (2 * length - chunk(1) - chunk(2)), kFloat * (2 * length - chunk(0) - chunk(1))};
}

}  // namespace ps
