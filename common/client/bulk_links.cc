#include "common/client/bulk_links.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/cluster/host_port.h"
#include "common/net/bulk_frame.h"
#include "common/net/proto_byte_buffer.h"
#include "common/net/ticket_door.h"
#include "glog/logging.h"

namespace ps {
namespace {

// A connection to `host`:`port` within `timeout` (for all its addresses together), or why not.
absl::StatusOr<int> ConnectWithin(const std::string& host, int port, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (const int error = getaddrinfo(host.c_str(), service.c_str(), &hints, &found); error != 0) {
    return absl::UnavailableError(absl::StrCat("resolving ", host, ": ", gai_strerror(error)));
  }
  std::string why = "no address";
  int connected = -1;
  for (addrinfo* at = found; at != nullptr && connected < 0; at = at->ai_next) {
    const int fd = socket(at->ai_family, at->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    if (connect(fd, at->ai_addr, at->ai_addrlen) != 0 && errno != EINPROGRESS) {
      why = std::strerror(errno);
      close(fd);
      continue;
    }
    pollfd polled{fd, POLLOUT, 0};
    int error = 0;
    socklen_t length = sizeof(error);
    const int64_t left_ms = std::max<int64_t>(0, absl::ToInt64Milliseconds(deadline - absl::Now()));
    if (poll(&polled, 1, static_cast<int>(left_ms)) != 1) {
      why = absl::StrCat("no answer within ", absl::FormatDuration(timeout));
    } else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length) != 0 || error != 0) {
      why = std::strerror(error != 0 ? error : errno);
    } else {
      connected = fd;
      continue;
    }
    close(fd);
  }
  freeaddrinfo(found);
  if (connected < 0) {
    return absl::UnavailableError(absl::StrCat("connecting to ", host, ":", port, ": ", why));
  }
  return connected;
}

}  // namespace

BulkLink::BulkLink(int fd, uint64_t stream) : fd_(fd), stream_(stream) {
  reader_ = std::thread([this] { Read(); });
  sender_ = std::thread([this] { Write(); });
}

BulkLink::~BulkLink() {
  {
    absl::MutexLock lock(&mu_);
    BreakLocked("");
  }
  reader_.join();
  sender_.join();
  close(fd_);
}

uint64_t BulkLink::Send(std::vector<absl::Span<const float>> pieces) {
  absl::MutexLock lock(&mu_);
  const uint64_t frame = next_push_frame_++;
  // Not queued on a broken link: AwaitSent then says it was not written.
  if (!broken_) outgoing_.push_back(Outgoing{frame, std::move(pieces)});
  return frame;
}

absl::Status BulkLink::AwaitSent(uint64_t frame, absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  auto settled = [this, frame]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return broken_ || written_ >= frame;
  };
  mu_.AwaitWithDeadline(absl::Condition(&settled), deadline);
  if (written_ >= frame) return absl::OkStatus();
  const bool timed_out = !broken_;
  if (timed_out) BreakLocked("a push's frame could not be written in time");
  auto left = [this, frame]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return writing_ != frame; };
  mu_.Await(absl::Condition(&left));
  return absl::UnavailableError(timed_out
                                    ? "the push's frame could not be written in time"
                                    : "the push's bulk stream broke before its frame was written");
}

int64_t BulkLink::frames_written() const {
  absl::MutexLock lock(&mu_);
  return frames_written_;
}

void BulkLink::Write() {
  for (;;) {
    Outgoing next;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return broken_ || !outgoing_.empty();
      };
      mu_.Await(absl::Condition(&ready));
      if (broken_) return;
      next = std::move(outgoing_.front());
      outgoing_.pop_front();
      writing_ = next.frame;
    }
    int64_t bytes = 0;
    for (absl::Span<const float> piece : next.pieces) bytes += piece.size() * sizeof(float);
    const absl::Time deadline =
        absl::Now() + kSendTimeout + absl::Milliseconds(100) * (bytes >> 20);
    absl::Status sent = SendBulkFrame(fd_, next.frame, next.pieces, deadline);
    absl::MutexLock lock(&mu_);
    writing_ = 0;
    if (!sent.ok()) {
      BreakLocked(sent.message());
      return;
    }
    written_ = next.frame;
    ++frames_written_;
  }
}

uint64_t BulkLink::Expect(std::vector<absl::Span<float>> destinations) {
  absl::MutexLock lock(&mu_);
  const uint64_t frame = next_frame_++;
  expected_[frame] = Expected{std::move(destinations), false};
  return frame;
}

absl::Status BulkLink::Await(uint64_t frame, absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  auto settled = [this, frame]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto it = expected_.find(frame);
    return broken_ || it == expected_.end() || it->second.done;
  };
  mu_.AwaitWithDeadline(absl::Condition(&settled), deadline);
  auto it = expected_.find(frame);
  if (it != expected_.end() && it->second.done) {
    expected_.erase(it);
    return absl::OkStatus();
  }
  const bool timed_out = !broken_;
  if (timed_out) BreakLocked("a frame did not come in time");
  auto left = [this, frame]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return reading_ != frame; };
  mu_.Await(absl::Condition(&left));
  expected_.erase(frame);
  return absl::UnavailableError(
      timed_out ? "the pull's values did not come on its bulk stream in time"
                : "the pull's bulk stream broke before its values came");
}

void BulkLink::Forget(uint64_t frame) {
  absl::MutexLock lock(&mu_);
  if (expected_.find(frame) == expected_.end()) return;
  if (reading_ == frame) {
    BreakLocked("a frame being read was given up");
    auto left = [this, frame]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return reading_ != frame; };
    mu_.Await(absl::Condition(&left));
  }
  expected_.erase(frame);
}

bool BulkLink::broken() const {
  absl::MutexLock lock(&mu_);
  return broken_;
}

bool BulkLink::expecting() const {
  absl::MutexLock lock(&mu_);
  return !expected_.empty();
}

void BulkLink::BreakLocked(absl::string_view why) {
  if (broken_) return;
  broken_ = true;
  if (!why.empty()) LOG(INFO) << "bulk stream " << stream_ << " closes: " << why;
  outgoing_.clear();
  shutdown(fd_, SHUT_RDWR);  // Ends a read or write in progress at once.
}

void BulkLink::Read() {
  for (;;) {
    absl::StatusOr<BulkFrameHeader> header = ReadBulkFrameHeader(fd_);
    std::vector<absl::Span<float>> into;
    bool wanted = false;
    {
      absl::MutexLock lock(&mu_);
      if (broken_) return;
      if (!header.ok()) {
        BreakLocked(header.status().message());
        return;
      }
      auto it = expected_.find(header->frame);
      if (it != expected_.end()) {
        uint64_t bytes = 0;
        for (absl::Span<float> destination : it->second.destinations) {
          bytes += destination.size() * sizeof(float);
        }
        if (bytes != header->bytes) {
          BreakLocked(absl::StrCat("frame ", header->frame, " holds ", header->bytes,
                                   " bytes where its pull expects ", bytes));
          return;
        }
        into = it->second.destinations;
        wanted = true;
        reading_ = header->frame;
      }
    }
    // A frame no one waits for any more (its pull was made again, or gave up) is read past.
    absl::Status read = wanted ? ReadBulkValues(fd_, into) : SkipBulkBytes(fd_, header->bytes);
    absl::MutexLock lock(&mu_);
    reading_ = 0;
    if (!read.ok()) {
      BreakLocked(read.message());
      return;
    }
    if (auto it = expected_.find(header->frame); wanted && it != expected_.end()) {
      it->second.done = true;
    }
  }
}

BulkLinks::BulkLinks(PsConnections* connections, OpenBulkStreamRequest identity,
                     std::vector<int64_t> shard_floats, int64_t min_floats, int streams_per_ps)
    : connections_(connections),
      identity_(std::move(identity)),
      shard_floats_(std::move(shard_floats)),
      min_floats_(min_floats),
      streams_per_ps_(std::clamp(streams_per_ps, 1, kMaxStreamsPerPs)),
      refused_(shard_floats_.size(), false),
      lost_(shard_floats_.size(), 0) {
  for (size_t ps = 0; ps < shard_floats_.size(); ++ps) {
    links_.emplace_back(streams_per_ps_);
    absl::MutexLock lock(&sends_mu_);
    stale_.emplace_back(streams_per_ps_, false);
  }
}

BulkLink* BulkLinks::For(int ps, int k) {
  if (links_[ps][k] != nullptr && links_[ps][k]->broken()) DropLost(ps, k);  // Opened anew.
  if (links_[ps][k] != nullptr) return links_[ps][k].get();
  if (refused_[ps] || shard_floats_[ps] < std::max<int64_t>(1, min_floats_)) return nullptr;
  // A pull made again in the answer carries its part of the shard in one message.
  const int64_t bytes = shard_floats_[ps] * static_cast<int64_t>(sizeof(float));
  if (!connections_->FitsOneMessage(bytes)) {
    refused_[ps] = true;
    LOG(INFO) << connections_->ShardName(ps) << ": job " << identity_.job_id()
              << "'s values come in the answers, in chunks, not on a bulk stream: the shard's "
              << bytes << " bytes would not fit one answer of max_message_bytes ("
              << connections_->options().max_message_bytes
              << ") were a pull made again in the answer";
    return nullptr;
  }
  bool lasting = true;
  absl::StatusOr<std::unique_ptr<BulkLink>> opened = Open(ps, &lasting);
  if (!opened.ok() && !lasting) return nullptr;  // This use's own call meets the same trouble.
  if (!opened.ok()) {
    refused_[ps] = true;
    LOG(INFO) << connections_->ShardName(ps) << ": job " << identity_.job_id()
              << "'s pulls bring their values in the answers, not on a bulk stream: "
              << opened.status().message();
    return nullptr;
  }
  links_[ps][k] = *std::move(opened);
  return links_[ps][k].get();
}

std::function<grpc::ByteBuffer()> BulkLinks::FirstOnStream(
    int ps, int k, BulkLink* link, EncodeRequest encode,
    std::vector<absl::Span<float>> destinations, std::shared_ptr<uint64_t> frame) {
  auto attempts = std::make_shared<int>(0);
  return [this, ps, k, link, encode = std::move(encode), destinations = std::move(destinations),
          frame, attempts] {
    if ((*attempts)++ == 0) {
      *frame = link->Expect(destinations);
      return encode(link->stream(), *frame);
    }
    if (*frame != 0) link->Forget(*frame);
    *frame = 0;
    MarkStale(ps, k);
    return encode(0, 0);
  };
}

std::function<grpc::ByteBuffer()> BulkLinks::FirstPushOnStream(
    int ps, int k, BulkLink* link, EncodeRequest encode,
    std::vector<absl::Span<const float>> pieces, std::shared_ptr<uint64_t> frame) {
  auto attempts = std::make_shared<int>(0);
  int64_t bytes = 0;
  for (absl::Span<const float> piece : pieces) bytes += piece.size() * sizeof(float);
  return [this, ps, k, link, encode = std::move(encode), pieces = std::move(pieces), frame,
          attempts, bytes] {
    if ((*attempts)++ == 0) {
      *frame = link->Send(pieces);
      {
        absl::MutexLock lock(&sends_mu_);
        sends_.push_back(Queued{link, *frame, bytes});
      }
      return encode(link->stream(), *frame);
    }
    *frame = 0;
    MarkStale(ps, k);
    return encode(0, 0);
  };
}

void BulkLinks::FinishSends() {
  std::vector<Queued> sends;
  {
    absl::MutexLock lock(&sends_mu_);
    sends.swap(sends_);
  }
  for (const Queued& queued : sends) {
    // A broken link says so at once; a frame the ps reads past is written as fast. The call's
    // outcome says what became of the push.
    queued.link
        ->AwaitSent(queued.frame,
                    absl::Now() + BulkLink::FrameTimeout(queued.bytes) + absl::Seconds(2))
        .IgnoreError();
  }
}

void BulkLinks::DropLost(size_t ps, int k) {
  links_[ps][k].reset();  // Joins its reader: nothing is written into a pull's values after.
  if (++lost_[ps] == kLostStreamsBeforeGivingUp) {
    refused_[ps] = true;
    LOG(INFO) << connections_->ShardName(static_cast<int>(ps)) << ": job " << identity_.job_id()
              << "'s pulls bring their values in the answers from now on: "
              << kLostStreamsBeforeGivingUp << " of its bulk streams were lost (closed by the "
              << "ps, broken, or too slow)";
  }
}

void BulkLinks::MarkStale(int ps, int k) {
  absl::MutexLock lock(&sends_mu_);  // Calls' requests may be made on several threads.
  stale_[ps][k] = true;
}

void BulkLinks::DropStale() {
  std::vector<std::vector<bool>> stale;
  {
    absl::MutexLock lock(&sends_mu_);
    stale = stale_;
    for (std::vector<bool>& shard : stale_) shard.assign(shard.size(), false);
  }
  for (size_t ps = 0; ps < links_.size(); ++ps) {
    for (int k = 0; k < streams_per_ps_; ++k) {
      const std::unique_ptr<BulkLink>& link = links_[ps][k];
      if (link != nullptr && (stale[ps][k] || link->broken())) DropLost(ps, k);
    }
  }
}

void BulkLinks::DropExpecting() {
  for (size_t ps = 0; ps < links_.size(); ++ps) {
    for (int k = 0; k < streams_per_ps_; ++k) {
      if (links_[ps][k] != nullptr && links_[ps][k]->expecting()) links_[ps][k].reset();
    }
  }
  DropStale();
}

absl::StatusOr<std::unique_ptr<BulkLink>> BulkLinks::Open(int ps, bool* lasting) {
  OpenBulkStreamResponse response;
  std::vector<PsConnections::Call> calls;
  calls.push_back(PsConnections::Call{
      ps, "OpenBulkStream", [this] { return SerializeToByteBuffer(identity_); },
      [&response](const grpc::ByteBuffer& bytes) { return ParseFromByteBuffer(bytes, &response); },
      connections_->options().call_timeout, 0});
  absl::Status status = connections_->RunCalls(std::move(calls));
  // The job not there yet, or the ps not reachable: worth another try at the next use.
  // The ps full (its streams or offers; others may close soon): the same.
  *lasting = !(absl::IsNotFound(status) || absl::IsUnavailable(status) ||
               absl::IsDeadlineExceeded(status) || absl::IsResourceExhausted(status));
  if (!status.ok()) return status;
  // Reached or not from here, the answer holds for the session: a port the network does not
  // let through (a firewall) stays so, for every ps of that host.
  *lasting = true;
  absl::StatusOr<HostPort> address = ParseHostPort(connections_->options().ps_addresses[ps]);
  if (!address.ok()) return address.status();
  if (std::find(unreachable_hosts_.begin(), unreachable_hosts_.end(), address->host) !=
      unreachable_hosts_.end()) {
    return absl::UnavailableError(
        absl::StrCat("the bulk port of another ps on ", address->host, " was out of reach"));
  }
  // The ps has just answered from that host: a connection that takes longer is held up by
  // the network between (a firewall that drops it), and each shard pays this once a session.
  const absl::Duration timeout = std::min(connections_->options().call_timeout, absl::Seconds(1));
  absl::StatusOr<int> fd = ConnectWithin(address->host, response.port(), timeout);
  if (!fd.ok()) {
    unreachable_hosts_.push_back(address->host);
    return absl::UnavailableError(absl::StrCat(
        "its bulk port is out of reach (", fd.status().message(), "; ps_server --bulk_port)"));
  }
  timeval limit = absl::ToTimeval(timeout);
  const int flags = fcntl(*fd, F_GETFL);
  fcntl(*fd, F_SETFL, flags & ~O_NONBLOCK);
  setsockopt(*fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof(limit));
  setsockopt(*fd, SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof(limit));
  const int one = 1;
  setsockopt(*fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  char reply = 0;
  const std::string& ticket = response.ticket();
  if (send(*fd, ticket.data(), ticket.size(), MSG_NOSIGNAL) !=
          static_cast<ssize_t>(ticket.size()) ||
      recv(*fd, &reply, 1, 0) != 1 || reply != TicketDoor::kGranted) {
    close(*fd);
    // Closed without an answer: the door was full (strangers waiting), worth another try.
    *lasting = reply == TicketDoor::kRefused;
    return absl::PermissionDeniedError(
        "the ps did not let the stream in with the ticket it answered (expired, or the "
        "connection reached another process)");
  }
  timeval none{0, 0};  // The reader waits as long as frames take; an Await's deadline ends it.
  setsockopt(*fd, SOL_SOCKET, SO_RCVTIMEO, &none, sizeof(none));
  timeval write_limit = absl::ToTimeval(BulkLink::kSendTimeout);
  setsockopt(*fd, SOL_SOCKET, SO_SNDTIMEO, &write_limit, sizeof(write_limit));
  return std::make_unique<BulkLink>(*fd, response.stream());
}

}  // namespace ps
