#include "common/process/daemon.h"

#include <malloc.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>

#include <csignal>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/security/transport_security.h"

namespace ps {
namespace {

sigset_t StopSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  return signals;
}

sem_t stop_semaphore;
volatile std::sig_atomic_t stop_signal = 0;

// Runs in whichever thread does not block the signal: WaitForStopSignal's, or one that a
// library started before main. Async-signal-safe.
void OnStopSignal(int signal) {
  stop_signal = signal;
  sem_post(&stop_semaphore);
}

}  // namespace

void TuneForTensorTraffic() {
  // Blocks below 32 MiB (glibc's largest threshold) come from the heap, and up to 512 MiB of
  // free memory at its top stays there.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 512 << 20);
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
}

void BlockStopSignals() {
  static const bool installed = [] {
    sem_init(&stop_semaphore, /*pshared=*/0, /*value=*/0);
    struct sigaction action = {};
    action.sa_handler = OnStopSignal;
    action.sa_flags = SA_RESTART;
    sigfillset(&action.sa_mask);
    sigaction(SIGTERM, &action, nullptr);
    sigaction(SIGINT, &action, nullptr);
    return true;
  }();
  (void)installed;
  sigset_t signals = StopSignals();
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
}

int WaitForStopSignal() {
  sigset_t signals = StopSignals();
  pthread_sigmask(SIG_UNBLOCK, &signals, nullptr);
  // EINTR when the handler ran in this thread: the semaphore is posted all the same.
  while (sem_wait(&stop_semaphore) != 0) continue;
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  return stop_signal;
}

std::string ListenHost(const std::string& bind_host, const std::string& own_host) {
  if (!bind_host.empty()) return bind_host;
  if (own_host == "::1" || own_host == "[::1]") return "::1";
  return IsLoopbackHost(own_host) ? "127.0.0.1" : "0.0.0.0";
}

absl::Status WritePortFile(const std::string& path, int port, FileSystem* fs) {
  absl::Status status = fs->WriteFileAtomically(path, absl::StrCat(port, "\n"));
  if (!status.ok()) {
    return absl::Status(status.code(),
                        absl::StrCat("cannot write the port file: ", status.message()));
  }
  return absl::OkStatus();
}

}  // namespace ps
