#include "common/process/subprocess.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <random>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/file_system.h"

extern char** environ;

namespace ps {

absl::StatusOr<Subprocess> Subprocess::Start(const std::vector<std::string>& argv,
                                             const std::string& output_path,
                                             const std::vector<std::string>& extra_env) {
  std::vector<char*> args;
  for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  std::vector<std::string> env_storage;
  for (char** e = environ; *e != nullptr; ++e) env_storage.emplace_back(*e);
  for (const std::string& e : extra_env) env_storage.push_back(e);
  std::vector<char*> env;
  for (std::string& e : env_storage) env.push_back(e.data());
  env.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, output_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  pid_t pid;
  int error = posix_spawn(&pid, args[0], &actions, nullptr, args.data(), env.data());
  posix_spawn_file_actions_destroy(&actions);
  if (error != 0) {
    return absl::InternalError(absl::StrCat("cannot start ", argv[0], ": ", std::strerror(error)));
  }
  return Subprocess(pid, output_path);
}

Subprocess::Subprocess(Subprocess&& other) noexcept
    : pid_(other.pid_), output_path_(std::move(other.output_path_)) {
  other.pid_ = -1;
}

Subprocess& Subprocess::operator=(Subprocess&& other) noexcept {
  if (this != &other) {
    KillAndReap();
    pid_ = other.pid_;
    output_path_ = std::move(other.output_path_);
    other.pid_ = -1;
  }
  return *this;
}

Subprocess::~Subprocess() { KillAndReap(); }

void Subprocess::KillAndReap() {
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
}

void Subprocess::Signal(int signal) const {
  if (pid_ > 0) kill(pid_, signal);
}

std::optional<int> Subprocess::Wait(absl::Duration timeout) {
  if (pid_ <= 0) return std::nullopt;
  absl::Time deadline = absl::Now() + timeout;
  while (true) {
    int status = 0;
    pid_t done = waitpid(pid_, &status, WNOHANG);
    if (done == pid_) {
      pid_ = -1;
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    if (absl::Now() >= deadline) return std::nullopt;
    absl::SleepFor(absl::Milliseconds(10));
  }
}

std::string Subprocess::Output() const {
  absl::StatusOr<std::string> text = FileSystem::Default()->ReadFile(output_path_);
  return text.ok() ? *std::move(text) : "";
}

namespace {

// Whether `port` (0: any) can be bound on 127.0.0.1 now; the port bound, or -1.
int TryBindLoopback(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(static_cast<uint16_t>(port));
  socklen_t length = sizeof(address);
  int bound = -1;
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0) {
    bound = ntohs(address.sin_port);
  }
  close(fd);
  return bound;
}

// The first port of the kernel's ephemeral range (the ports it gives to outgoing connections
// and to binds of port 0), or 0 when unknown.
int EphemeralRangeStart() {
  absl::StatusOr<std::string> text =
      FileSystem::Default()->ReadFile("/proc/sys/net/ipv4/ip_local_port_range");
  int start = 0;
  if (!text.ok()) return 0;
  std::string first(absl::StripAsciiWhitespace(text->substr(0, text->find_first_of(" \t"))));
  return absl::SimpleAtoi(first, &start) ? start : 0;
}

}  // namespace

absl::StatusOr<int> PickUnusedPort() {
  // A port of the ephemeral range, released, can be taken again at once by any process's
  // outgoing connection or port-0 server before the daemon binds it (seen in CI as "Address
  // already in use"). Below the range only another explicit bind can take it: try random
  // ports there first.
  constexpr int kLowest = 10000;
  const int ephemeral = EphemeralRangeStart();
  if (ephemeral > kLowest + 1000) {
    thread_local std::mt19937 random(std::random_device{}() ^ static_cast<unsigned>(getpid()));
    std::uniform_int_distribution<int> pick(kLowest, ephemeral - 1);
    for (int attempt = 0; attempt < 100; ++attempt) {
      if (int port = TryBindLoopback(pick(random)); port > 0) return port;
    }
  }
  const int port = TryBindLoopback(0);
  if (port <= 0) return absl::InternalError("cannot find an unused port");
  return port;
}

absl::StatusOr<std::vector<int>> PickUnusedPorts(int count) {
  std::vector<int> ports;
  std::set<int> seen;
  while (static_cast<int>(ports.size()) < count) {
    absl::StatusOr<int> port = PickUnusedPort();
    if (!port.ok()) return port.status();
    if (seen.insert(*port).second) ports.push_back(*port);
  }
  return ports;
}

absl::StatusOr<int> WaitForPortFile(const std::string& path, absl::Duration timeout) {
  absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    absl::StatusOr<std::string> text = FileSystem::Default()->ReadFile(path);
    int port = 0;
    if (text.ok() &&
        absl::SimpleAtoi(absl::StripAsciiWhitespace(text->substr(0, text->find('\n'))), &port) &&
        port > 0) {
      return port;
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  return absl::DeadlineExceededError(absl::StrCat("no port in ", path, " after ",
                                                  absl::FormatDuration(timeout)));
}


}  // namespace ps
