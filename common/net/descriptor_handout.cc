#include "common/net/descriptor_handout.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "glog/logging.h"

namespace ps {
namespace {

absl::Status ErrnoError(absl::string_view what) {
  return absl::InternalError(absl::StrCat(what, ": ", std::strerror(errno)));
}

absl::StatusOr<sockaddr_un> SocketAddress(const std::string& path) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (path.size() >= sizeof(address.sun_path)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the socket path ", path, " is longer than a Unix socket address allows (",
        sizeof(address.sun_path) - 1, " characters): choose a shorter directory"));
  }
  std::memcpy(address.sun_path, path.data(), path.size());
  return address;
}

// Answers `connection` with `fd` attached, or refused where fd < 0.
void Answer(int connection, int fd) {
  char reply = fd >= 0 ? TicketDoor::kGranted : TicketDoor::kRefused;
  iovec part{&reply, 1};
  msghdr message{};
  message.msg_iov = &part;
  message.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  if (fd >= 0) {
    message.msg_control = control;
    message.msg_controllen = sizeof(control);
    cmsghdr* header = CMSG_FIRSTHDR(&message);
    header->cmsg_level = SOL_SOCKET;
    header->cmsg_type = SCM_RIGHTS;
    header->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(header), &fd, sizeof(int));
  }
  if (sendmsg(connection, &message, MSG_NOSIGNAL | MSG_DONTWAIT) != 1) {
    LOG(WARNING) << "descriptor handout: answering a peer failed: " << std::strerror(errno);
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<DescriptorHandout>> DescriptorHandout::Start(
    const std::string& directory) {
  if (mkdir(directory.c_str(), 0755) != 0 && errno != EEXIST) {
    return ErrnoError(absl::StrCat("making ", directory));
  }
  struct stat info;
  if (lstat(directory.c_str(), &info) != 0) return ErrnoError(absl::StrCat("lstat ", directory));
  const bool others_write = (info.st_mode & (S_IWGRP | S_IWOTH)) != 0;
  if (!S_ISDIR(info.st_mode) || (info.st_uid != geteuid() && info.st_uid != 0) ||
      (others_write && (info.st_mode & S_ISVTX) == 0)) {
    return absl::FailedPreconditionError(absl::StrCat(
        directory, " is not a directory that only this user or root may change (or, writable "
        "by others, sticky as /tmp): another user could put their socket in place of ours; "
        "choose another (--shared_memory_dir)"));
  }
  const std::string path =
      absl::StrCat(directory, "/ps-shm-", getpid(), "-", absl::BytesToHexString(TicketDoor::RandomBytes(4)),
                   ".sock");
  absl::StatusOr<sockaddr_un> address = SocketAddress(path);
  if (!address.ok()) return address.status();
  const int listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (listen_fd < 0) return ErrnoError("socket");
  absl::Status status;
  if (bind(listen_fd, reinterpret_cast<const sockaddr*>(&*address), sizeof(*address)) != 0) {
    status = ErrnoError(absl::StrCat("binding ", path));
  } else if (chmod(path.c_str(), 0666) != 0) {  // The tickets guard it, not the file's mode.
    status = ErrnoError(absl::StrCat("opening ", path, " to local users"));
  } else if (listen(listen_fd, kMaxConnections) != 0) {
    status = ErrnoError(absl::StrCat("listening on ", path));
  }
  if (!status.ok()) {
    close(listen_fd);
    unlink(path.c_str());
    return status;
  }
  return std::unique_ptr<DescriptorHandout>(new DescriptorHandout(listen_fd, path));
}

DescriptorHandout::~DescriptorHandout() {
  door_.reset();
  unlink(socket_path_.c_str());
}

absl::StatusOr<std::string> DescriptorHandout::Offer(MakeDescriptor make, absl::Duration ttl) {
  return door_->Offer(
      [make = std::move(make)](int connection) {
        absl::StatusOr<int> made = make();
        if (!made.ok()) {
          LOG(WARNING) << "descriptor handout: an offer's descriptor could not be made: "
                       << made.status();
        }
        Answer(connection, made.ok() ? *made : -1);
        if (made.ok()) close(*made);
        close(connection);
      },
      ttl);
}

absl::StatusOr<int> DescriptorHandout::Fetch(const std::string& socket_path,
                                             absl::string_view ticket, absl::Duration timeout) {
  absl::StatusOr<sockaddr_un> address = SocketAddress(socket_path);
  if (!address.ok()) return address.status();
  if (static_cast<int>(ticket.size()) != kTicketBytes) {
    return absl::InvalidArgumentError(absl::StrCat("a ticket of ", ticket.size(),
                                                   " bytes: a handout's tickets have ",
                                                   kTicketBytes));
  }
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return ErrnoError("socket");
  timeval limit = absl::ToTimeval(timeout);
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof(limit));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof(limit));
  auto fail = [fd](absl::Status status) {
    close(fd);
    return status;
  };
  if (connect(fd, reinterpret_cast<const sockaddr*>(&*address), sizeof(*address)) != 0) {
    if (errno == EAGAIN) {
      return fail(absl::UnavailableError(absl::StrCat(
          "the descriptor handout at ", socket_path, " is busy: ", std::strerror(errno))));
    }
    return fail(absl::FailedPreconditionError(
        absl::StrCat("no descriptor handout reachable at ", socket_path, " (",
                     std::strerror(errno), "): the ps is on another host or in another container")));
  }
  if (send(fd, ticket.data(), ticket.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(ticket.size())) {
    return fail(absl::UnavailableError(
        absl::StrCat("sending a ticket to ", socket_path, ": ", std::strerror(errno))));
  }
  char reply = 0;
  iovec part{&reply, 1};
  msghdr message{};
  message.msg_iov = &part;
  message.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  message.msg_control = control;
  message.msg_controllen = sizeof(control);
  const ssize_t got = recvmsg(fd, &message, MSG_CMSG_CLOEXEC);
  if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
    return fail(absl::DeadlineExceededError(absl::StrCat(
        "the descriptor handout at ", socket_path, " did not answer within ",
        absl::FormatDuration(timeout))));
  }
  int received = -1;
  for (cmsghdr* header = CMSG_FIRSTHDR(&message); header != nullptr;
       header = CMSG_NXTHDR(&message, header)) {
    if (header->cmsg_level == SOL_SOCKET && header->cmsg_type == SCM_RIGHTS) {
      std::memcpy(&received, CMSG_DATA(header), sizeof(int));
    }
  }
  close(fd);
  if (got == 1 && reply == TicketDoor::kGranted && received >= 0) return received;
  if (received >= 0) close(received);
  if (got == 1 && reply == TicketDoor::kRefused) {
    return absl::PermissionDeniedError(absl::StrCat(
        "the descriptor handout at ", socket_path,
        " refused the ticket: unknown, fetched already, or expired; open the segment again"));
  }
  return absl::UnavailableError(
      absl::StrCat("the descriptor handout at ", socket_path, " closed without an answer"));
}

}  // namespace ps
