#include "server/bulk_streams.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/net/bulk_frame.h"
#include "common/tensor/finite.h"
#include "glog/logging.h"

namespace ps {

BulkStream::BulkStream(int fd, std::shared_ptr<std::atomic<int64_t>> queued_bytes,
                       int64_t max_queued_bytes)
    : fd_(fd), all_queued_bytes_(std::move(queued_bytes)), max_queued_bytes_(max_queued_bytes) {
  sender_ = std::thread([this] { Run(); });
  reader_ = std::thread([this] { Read(); });
}

BulkStream::~BulkStream() {
  Close();
  sender_.join();
  reader_.join();
  close(fd_);
}

absl::Status BulkStream::Send(uint64_t frame, std::vector<absl::Span<const float>> pieces,
                              std::shared_ptr<const void> keep_alive) {
  int64_t bytes = 0;
  for (absl::Span<const float> piece : pieces) bytes += piece.size() * sizeof(float);
  absl::MutexLock lock(&mu_);
  if (closed_) return absl::UnavailableError("the pull's bulk stream is closed");
  if (static_cast<int>(queue_.size()) >= kMaxQueuedFrames) {
    return absl::UnavailableError("the pull's bulk stream holds frames not yet read");
  }
  if (all_queued_bytes_->fetch_add(bytes) + bytes > max_queued_bytes_) {
    all_queued_bytes_->fetch_sub(bytes);
    return absl::UnavailableError("this ps's bulk streams hold as much as they may");
  }
  queue_.push_back(Frame{frame, std::move(pieces), std::move(keep_alive), bytes});
  return absl::OkStatus();
}

void BulkStream::Receive(uint64_t frame, std::vector<absl::Span<float>> destinations,
                         std::shared_ptr<void> keep_alive, Received done) {
  int64_t bytes = 0;
  for (absl::Span<float> destination : destinations) bytes += destination.size() * sizeof(float);
  absl::Status refused;
  {
    absl::MutexLock lock(&mu_);
    if (closed_) {
      refused = absl::UnavailableError("the push's bulk stream is closed");
    } else if (frame == 0 || frame <= passed_) {
      refused = absl::UnavailableError(absl::StrCat(
          "frame ", frame, " of the push's bulk stream came before its call could take it, and "
          "was read past: send the gradient in the request"));
    } else if (expected_.contains(frame)) {
      refused = absl::InvalidArgumentError(
          absl::StrCat("frame ", frame, " of the bulk stream is named by another push call"));
    } else if (static_cast<int>(expected_.size()) >= kMaxExpectedFrames) {
      refused = absl::UnavailableError(absl::StrCat(
          "the push's bulk stream has ", kMaxExpectedFrames, " frames expected already"));
    } else {
      expected_[frame] = Expected{std::move(destinations), std::move(keep_alive),
                                  std::move(done), absl::Now() + ReceiveTimeout(bytes), false};
      return;
    }
  }
  done(refused, false);
}

void BulkStream::Refuse(uint64_t frame) {
  absl::MutexLock lock(&mu_);
  if (closed_ || frame <= passed_ || expected_.contains(frame) ||
      static_cast<int>(expected_.size()) >= 2 * kMaxExpectedFrames) {
    return;  // Read past anyway once kClaimTimeout has passed.
  }
  Expected refused;
  refused.refused = true;
  refused.deadline = absl::Now() + ReceiveTimeout(0);
  expected_[frame] = std::move(refused);
}

void BulkStream::ClearQueueLocked() {
  for (const Frame& queued : queue_) all_queued_bytes_->fetch_sub(queued.bytes);
  queue_.clear();
}

void BulkStream::CloseLocked(absl::string_view why, std::vector<Received>* failed) {
  // The frame being read is told by the reader once its read ends: its buffer is written
  // until then.
  for (auto it = expected_.begin(); it != expected_.end();) {
    if (it->first == reading_) {
      ++it;
      continue;
    }
    if (it->second.done != nullptr) failed->push_back(std::move(it->second.done));
    expected_.erase(it++);
  }
  if (closed_) return;
  if (!why.empty()) LOG(INFO) << "a bulk stream closes: " << why;
  closed_ = true;
  ClearQueueLocked();
  shutdown(fd_, SHUT_RDWR);  // Ends a write or read in progress at once.
}

void BulkStream::Fail(std::vector<Received> failed, absl::string_view why) {
  for (Received& done : failed) {
    done(absl::UnavailableError(absl::StrCat("the push's bulk stream closed (", why,
                                             ") before its values came: send them in the "
                                             "request")),
         false);
  }
}

void BulkStream::Close() {
  std::vector<Received> failed;
  {
    absl::MutexLock lock(&mu_);
    CloseLocked("", &failed);
  }
  Fail(std::move(failed), "closed by the ps");
}

bool BulkStream::closed() const {
  absl::MutexLock lock(&mu_);
  return closed_;
}

BulkTraffic BulkStream::traffic() const {
  absl::MutexLock lock(&mu_);
  return traffic_;
}

void BulkStream::Run() {
  for (;;) {
    Frame next;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return closed_ || !queue_.empty();
      };
      mu_.Await(absl::Condition(&ready));
      if (closed_) return;
      next = std::move(queue_.front());
      queue_.pop_front();
    }
    const absl::Time deadline =
        absl::Now() + kSendTimeout + absl::Milliseconds(100) * (next.bytes >> 20);
    absl::Status sent = SendBulkFrame(fd_, next.frame, next.pieces, deadline);
    next.keep_alive.reset();  // The snapshot goes as soon as it is sent.
    all_queued_bytes_->fetch_sub(next.bytes);
    std::vector<Received> failed;
    {
      absl::MutexLock lock(&mu_);
      if (sent.ok()) {
        ++traffic_.frames_sent;
        traffic_.bytes_sent += next.bytes;
        continue;
      }
      CloseLocked(sent.message(), &failed);
    }
    Fail(std::move(failed), sent.message());
    return;
  }
}

void BulkStream::Read() {
  // Ends the stream for `why`, telling the frames expected.
  auto close_for = [this](absl::string_view why) ABSL_LOCKS_EXCLUDED(mu_) {
    std::vector<Received> failed;
    {
      absl::MutexLock lock(&mu_);
      CloseLocked(why, &failed);
    }
    Fail(std::move(failed), why);
  };
  for (;;) {
    // Frames that did not come in time close the stream; refused ones that never came are
    // forgotten. Checked before each frame, and every 0.1 s while none comes.
    std::string late;
    {
      absl::MutexLock lock(&mu_);
      if (closed_) return;
      const absl::Time now = absl::Now();
      std::vector<uint64_t> forgotten;
      for (const auto& [frame, expected] : expected_) {
        if (expected.deadline > now) continue;
        if (expected.refused) {
          forgotten.push_back(frame);
        } else {
          late = absl::StrCat("frame ", frame, " did not come in time");
        }
      }
      for (uint64_t frame : forgotten) expected_.erase(frame);
    }
    if (!late.empty()) {
      close_for(late);
      return;
    }
    pollfd polled{fd_, POLLIN, 0};
    if (poll(&polled, 1, 100) <= 0) continue;
    absl::StatusOr<BulkFrameHeader> header = ReadBulkFrameHeader(fd_);
    if (!header.ok()) {
      close_for(header.status().message());
      return;
    }
    std::vector<absl::Span<float>> into;
    std::shared_ptr<void> keep_alive;  // Keeps `into` writable while it is read into.
    absl::Time deadline;               // Of the frame wanted.
    bool wanted = false;
    std::string out_of_step;
    {
      absl::MutexLock lock(&mu_);
      if (closed_) return;
      if (header->frame <= passed_) {
        out_of_step = absl::StrCat("frame ", header->frame, " came after frame ", passed_);
      } else {
        claiming_ = header->frame;
        auto claimed = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
          return closed_ || expected_.contains(claiming_);
        };
        mu_.AwaitWithTimeout(absl::Condition(&claimed), kClaimTimeout);
        claiming_ = 0;
        if (closed_) return;
        auto it = expected_.find(header->frame);
        if (it != expected_.end() && !it->second.refused) {
          uint64_t bytes = 0;
          for (absl::Span<float> destination : it->second.destinations) {
            bytes += destination.size() * sizeof(float);
          }
          if (bytes != header->bytes) {
            out_of_step = absl::StrCat("frame ", header->frame, " holds ", header->bytes,
                                       " bytes where its push expects ", bytes);
          } else {
            into = it->second.destinations;
            keep_alive = it->second.keep_alive;
            deadline = it->second.deadline;
            wanted = true;
            reading_ = header->frame;
          }
        } else if (it != expected_.end()) {
          expected_.erase(it);  // Refused: read past.
        }
        // From now on a call naming this frame is told it was passed (read past, or taken).
        if (out_of_step.empty()) passed_ = header->frame;
      }
    }
    if (!out_of_step.empty()) {
      close_for(out_of_step);
      return;
    }
    // A frame whose call was refused, or did not register in time, is read past. One wanted is
    // read piece by piece, each checked while it is in cache.
    bool finite = true;
    absl::Status read = absl::OkStatus();
    if (!wanted) read = SkipBulkBytes(fd_, header->bytes);
    for (size_t d = 0; wanted && d < into.size() && read.ok(); ++d) {
      for (size_t done = 0; done < into[d].size() && read.ok(); done += kCheckedPiece) {
        if (absl::Now() > deadline) {
          read = absl::UnavailableError(
              absl::StrCat("frame ", header->frame, " did not come in time"));
          break;
        }
        const absl::Span<float> piece = into[d].subspan(done, kCheckedPiece);
        read = ReadBulkValues(fd_, {piece});
        if (read.ok() && finite) finite = AllFinite(piece);
      }
    }
    Received done;
    bool closed = false;
    {
      absl::MutexLock lock(&mu_);
      reading_ = 0;
      closed = closed_;
      if (auto it = expected_.find(header->frame); wanted && it != expected_.end()) {
        done = std::move(it->second.done);
        expected_.erase(it);
      }
      if (read.ok() && !closed && wanted) {
        ++traffic_.frames_received;
        traffic_.bytes_received += static_cast<int64_t>(header->bytes);
      }
    }
    keep_alive.reset();
    if (!read.ok() || closed) {
      if (done != nullptr) Fail({std::move(done)}, closed ? "closed" : read.message());
      close_for(read.ok() ? "" : read.message());
      return;
    }
    if (done != nullptr) done(absl::OkStatus(), finite);
  }
}

absl::StatusOr<std::unique_ptr<BulkStreams>> BulkStreams::Start(const std::string& host,
                                                                int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  const int resolved = getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints,
                                   &found);
  if (resolved != 0) {
    return absl::UnavailableError(absl::StrCat("bulk streams: cannot listen on ", host, ":", port,
                                               ": ", gai_strerror(resolved)));
  }
  std::string error = "no address";
  int listen_fd = -1;
  for (addrinfo* at = found; at != nullptr && listen_fd < 0; at = at->ai_next) {
    const int fd = socket(at->ai_family, at->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, at->ai_addr, at->ai_addrlen) == 0 &&
        listen(fd, TicketDoor::kMaxConnections) == 0) {
      listen_fd = fd;
    } else {
      error = std::strerror(errno);
      close(fd);
    }
  }
  freeaddrinfo(found);
  if (listen_fd < 0) {
    return absl::UnavailableError(absl::StrCat("bulk streams: cannot listen on ", host, ":", port,
                                               ": ", error, " (--bulk_port)"));
  }
  sockaddr_storage bound{};
  socklen_t length = sizeof(bound);
  getsockname(listen_fd, reinterpret_cast<sockaddr*>(&bound), &length);
  const int bound_port =
      bound.ss_family == AF_INET6
          ? ntohs(reinterpret_cast<const sockaddr_in6*>(&bound)->sin6_port)
          : ntohs(reinterpret_cast<const sockaddr_in*>(&bound)->sin_port);
  return std::unique_ptr<BulkStreams>(new BulkStreams(listen_fd, bound_port));
}

BulkStreams::~BulkStreams() {
  door_.reset();
  absl::flat_hash_map<uint64_t, Entry> streams;
  {
    absl::MutexLock lock(&mu_);
    streams.swap(streams_);
    by_worker_.clear();
  }
  for (auto& [id, entry] : streams) entry.stream->Close();
}

absl::StatusOr<BulkStreams::Opened> BulkStreams::Open(const std::string& job_id, int worker) {
  std::vector<std::shared_ptr<BulkStream>> closing;
  {
    absl::MutexLock lock(&mu_);
    // Streams that closed (too slow) or whose worker hung up hold no place.
    EraseWhereLocked(
        [](const Entry& entry) { return entry.stream->closed(); },
        &closing);
    if (static_cast<int>(streams_.size()) >= kMaxStreams) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "this ps holds ", kMaxStreams, " bulk streams; pulls go in the answers"));
    }
  }
  uint64_t id = 0;
  while (id == 0) {
    const std::string bytes = TicketDoor::RandomBytes(sizeof(id));
    std::memcpy(&id, bytes.data(), sizeof(id));
  }
  absl::StatusOr<std::string> ticket = door_->Offer(
      [this, id, job_id, worker](int fd) { Attach(id, job_id, worker, fd); }, kTicketLifetime);
  if (!ticket.ok()) return ticket.status();
  return Opened{id, *std::move(ticket)};
}

void BulkStreams::Attach(uint64_t stream, const std::string& job_id, int worker, int fd) {
  // Blocking from now on, each write bounded by kSendTimeout; no delay for the last bytes.
  const int flags = fcntl(fd, F_GETFL);
  fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  timeval limit = absl::ToTimeval(BulkStream::kSendTimeout);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof(limit));
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof(limit));  // A frame cut off mid-way.
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  std::vector<std::shared_ptr<BulkStream>> closing;
  {
    absl::MutexLock lock(&mu_);
    if (static_cast<int>(streams_.size()) >= kMaxStreams) {  // Offers taken since the Open.
      close(fd);
      return;
    }
  }
  auto made = std::make_shared<BulkStream>(fd, queued_bytes_, kMaxQueuedBytes);
  {
    // Found by pulls before the worker hears it is let in, so that its first pull finds it.
    // (A frame queued before the answer below, by a worker that pulls before it reads it, can
    // only garble that worker's own stream.)
    absl::MutexLock lock(&mu_);
    std::deque<uint64_t>& own = by_worker_[{job_id, worker}];
    while (static_cast<int>(own.size()) >= kStreamsPerWorker) EraseLocked(own.front(), &closing);
    by_worker_[{job_id, worker}].push_back(stream);
    streams_[stream] = Entry{job_id, worker, made};
  }
  for (const std::shared_ptr<BulkStream>& old : closing) old->Close();
  const char granted = TicketDoor::kGranted;
  if (send(fd, &granted, 1, MSG_NOSIGNAL) != 1) made->Close();  // Reaped at a later Open.
}

void BulkStreams::EraseLocked(uint64_t stream, std::vector<std::shared_ptr<BulkStream>>* closing) {
  auto it = streams_.find(stream);
  if (it == streams_.end()) return;
  const std::pair<std::string, int> owner = {it->second.job_id, it->second.worker};
  retired_ += it->second.stream->traffic();
  closing->push_back(std::move(it->second.stream));
  streams_.erase(it);
  auto own = by_worker_.find(owner);
  if (own == by_worker_.end()) return;
  std::deque<uint64_t>& ids = own->second;
  for (auto at = ids.begin(); at != ids.end(); ++at) {
    if (*at == stream) {
      ids.erase(at);
      break;
    }
  }
  if (ids.empty()) by_worker_.erase(own);
}

absl::StatusOr<std::shared_ptr<BulkStream>> BulkStreams::Find(uint64_t stream,
                                                              const std::string& job_id,
                                                              int worker) const {
  absl::MutexLock lock(&mu_);
  auto it = streams_.find(stream);
  if (it == streams_.end() || it->second.stream->closed()) {
    return absl::UnavailableError(
        "no such bulk stream on this ps (closed, or opened on a ps since restarted): the values "
        "go in the answer");
  }
  if (it->second.job_id != job_id || it->second.worker != worker) {
    return absl::PermissionDeniedError(
        "the bulk stream the call names belongs to another worker or job");
  }
  return it->second.stream;
}

void BulkStreams::EraseWhereLocked(const std::function<bool(const Entry&)>& erase,
                                   std::vector<std::shared_ptr<BulkStream>>* closing) {
  std::vector<uint64_t> ids;
  for (const auto& [id, entry] : streams_) {
    if (erase(entry)) ids.push_back(id);
  }
  for (uint64_t id : ids) EraseLocked(id, closing);
}

void BulkStreams::DropWhere(const std::function<bool(const Entry&)>& drop) {
  std::vector<std::shared_ptr<BulkStream>> closing;
  {
    absl::MutexLock lock(&mu_);
    EraseWhereLocked(drop, &closing);
  }
  for (const std::shared_ptr<BulkStream>& stream : closing) stream->Close();
}

void BulkStreams::DropWorker(const std::string& job_id, int worker) {
  DropWhere([&](const Entry& entry) { return entry.job_id == job_id && entry.worker == worker; });
}

void BulkStreams::DropJob(const std::string& job_id) {
  DropWhere([&](const Entry& entry) { return entry.job_id == job_id; });
}

void BulkStreams::DropAll() {
  DropWhere([](const Entry&) { return true; });
}

int BulkStreams::streams() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(streams_.size());
}

}  // namespace ps

namespace ps {

BulkTraffic BulkStreams::traffic() const {
  absl::MutexLock lock(&mu_);
  BulkTraffic total = retired_;
  for (const auto& [id, entry] : streams_) total += entry.stream->traffic();
  return total;
}

}  // namespace ps
