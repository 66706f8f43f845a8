#include "common/net/bulk_frame.h"

#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace ps {
namespace {

constexpr size_t kIovecsPerCall = 512;  // Below IOV_MAX (1024).

absl::Status SocketError(const char* what, ssize_t got) {
  if (got == 0) return absl::UnavailableError(absl::StrCat("bulk stream: ", what, ": closed"));
  if (errno == EAGAIN || errno == EWOULDBLOCK) {
    return absl::UnavailableError(absl::StrCat("bulk stream: ", what, ": timed out"));
  }
  return absl::UnavailableError(absl::StrCat("bulk stream: ", what, ": ", std::strerror(errno)));
}

// Moves `parts` on by `done` bytes, dropping those finished.
void Advance(std::vector<iovec>* parts, size_t* first, size_t done) {
  while (done > 0 && *first < parts->size()) {
    iovec& part = (*parts)[*first];
    const size_t step = std::min(done, part.iov_len);
    part.iov_base = static_cast<char*>(part.iov_base) + step;
    part.iov_len -= step;
    done -= step;
    if (part.iov_len == 0) ++*first;
  }
  while (*first < parts->size() && (*parts)[*first].iov_len == 0) ++*first;
}

// Sends (or receives) every byte of `parts`, giving up past `deadline` between calls.
absl::Status Transfer(int fd, std::vector<iovec> parts, bool send,
                      absl::Time deadline = absl::InfiniteFuture()) {
  size_t first = 0;
  Advance(&parts, &first, 0);
  while (first < parts.size()) {
    if (deadline != absl::InfiniteFuture() && absl::Now() > deadline) {
      return absl::UnavailableError("bulk stream: send: the worker reads too slowly");
    }
    msghdr message{};
    message.msg_iov = parts.data() + first;
    message.msg_iovlen = std::min(kIovecsPerCall, parts.size() - first);
    const ssize_t done = send ? sendmsg(fd, &message, MSG_NOSIGNAL) : recvmsg(fd, &message, 0);
    if (done < 0 && errno == EINTR) continue;
    if (done <= 0) return SocketError(send ? "send" : "receive", done);
    Advance(&parts, &first, static_cast<size_t>(done));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status SendBulkFrame(int fd, uint64_t frame, absl::Span<const absl::Span<const float>> pieces,
                           absl::Time deadline) {
  BulkFrameHeader header;
  header.frame = frame;
  std::vector<iovec> parts = {{&header, sizeof(header)}};
  for (absl::Span<const float> piece : pieces) {
    header.bytes += piece.size() * sizeof(float);
    parts.push_back({const_cast<float*>(piece.data()), piece.size() * sizeof(float)});
  }
  return Transfer(fd, std::move(parts), /*send=*/true, deadline);
}

absl::StatusOr<BulkFrameHeader> ReadBulkFrameHeader(int fd) {
  BulkFrameHeader header;
  header.magic = 0;
  absl::Status status = Transfer(fd, {{&header, sizeof(header)}}, /*send=*/false);
  if (!status.ok()) return status;
  if (header.magic != BulkFrameHeader::kMagic || header.reserved != 0) {
    return absl::DataLossError("bulk stream: a frame header that is not one (out of step)");
  }
  return header;
}

absl::Status ReadBulkValues(int fd, absl::Span<const absl::Span<float>> destinations) {
  std::vector<iovec> parts;
  for (absl::Span<float> destination : destinations) {
    parts.push_back({destination.data(), destination.size() * sizeof(float)});
  }
  return Transfer(fd, std::move(parts), /*send=*/false);
}

absl::Status SkipBulkBytes(int fd, uint64_t bytes) {
  std::vector<char> scratch(std::min<uint64_t>(bytes, 1 << 20));
  while (bytes > 0) {
    const size_t now = std::min<uint64_t>(bytes, scratch.size());
    absl::Status status = Transfer(fd, {{scratch.data(), now}}, /*send=*/false);
    if (!status.ok()) return status;
    bytes -= now;
  }
  return absl::OkStatus();
}

}  // namespace ps
