#include "common/daemon.h"

#include <pthread.h>
#include <signal.h>

#include <cstdio>

#include "absl/strings/str_cat.h"

namespace ps {
namespace {

sigset_t StopSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  return signals;
}

}  // namespace

void BlockStopSignals() {
  sigset_t signals = StopSignals();
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
}

int WaitForStopSignal() {
  sigset_t signals = StopSignals();
  int signal = 0;
  sigwait(&signals, &signal);
  return signal;
}

absl::Status WritePortFile(const std::string& path, int port) {
  std::string tmp = path + ".tmp";
  FILE* file = std::fopen(tmp.c_str(), "w");
  bool ok = file != nullptr && std::fprintf(file, "%d\n", port) > 0;
  if (file != nullptr) ok = std::fclose(file) == 0 && ok;
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    return absl::PermissionDeniedError(absl::StrCat("cannot write the port file ", path));
  }
  return absl::OkStatus();
}

}  // namespace ps
