// A child process (psctl local, multi-process tests): started with posix_spawn, its stdout
// and stderr in a file, killed by the destructor if still running, so that nothing is left
// behind when the owner fails.
#ifndef PS_COMMON_PROCESS_SUBPROCESS_H_
#define PS_COMMON_PROCESS_SUBPROCESS_H_

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace ps {

class Subprocess {
 public:
  // Starts `argv` (argv[0] is the program's path) with `extra_env` ("NAME=value") added to
  // this process's environment. Output goes to `output_path`.
  static absl::StatusOr<Subprocess> Start(const std::vector<std::string>& argv,
                                          const std::string& output_path,
                                          const std::vector<std::string>& extra_env = {});
  Subprocess(Subprocess&& other) noexcept;
  // Kills and reaps the process this held, then takes over `other`'s.
  Subprocess& operator=(Subprocess&& other) noexcept;
  // SIGKILLs and reaps the process if it is still running.
  ~Subprocess();

  pid_t pid() const { return pid_; }
  void Signal(int signal) const;
  // The exit code (128 + signal for a signal) once the process ends, or nullopt at `timeout`.
  std::optional<int> Wait(absl::Duration timeout);
  // What the process has written so far.
  std::string Output() const;

 private:
  Subprocess(pid_t pid, std::string output_path) : pid_(pid), output_path_(std::move(output_path)) {}

  void KillAndReap();

  pid_t pid_ = -1;  // -1 once reaped.
  std::string output_path_;
};

// A TCP port on 127.0.0.1 that nothing listens on right now (bound, then released), for
// daemons whose ClusterSpec must name their ports in advance. Picked below the kernel's
// ephemeral range where it can, so that no outgoing connection or port-0 server of another
// process takes it before the daemon binds it.
absl::StatusOr<int> PickUnusedPort();
// `count` such ports, all different (a port released by one pick may come back from the next).
absl::StatusOr<std::vector<int>> PickUnusedPorts(int count);

// Waits until `path` holds a port number (a server's --port_file), or the timeout.
absl::StatusOr<int> WaitForPortFile(const std::string& path, absl::Duration timeout);


}  // namespace ps

#endif  // PS_COMMON_PROCESS_SUBPROCESS_H_
