// Built only under --config=tsan (see //third_party:absl). Debian's Abseil is not compiled with
// ThreadSanitizer, so absl::Mutex synchronizes through futexes and atomics TSan cannot see, and
// every access it guards (in this project and in gRPC, whose gpr_mu is an absl::Mutex) would be
// reported as a race. This file interposes the Mutex and CondVar entry points: each one forwards
// to Abseil's own function and tells TSan about the happens-before edge it makes (a release
// before a lock is given up, an acquire once it is taken). The executable's definitions win over
// the shared library's for every caller, Abseil's own Notification and BlockingCounter included,
// because libabsl_synchronization is not linked with -Bsymbolic.
#include <dlfcn.h>
#include <sanitizer/tsan_interface.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/base/config.h"
#include "absl/base/macros.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace {

// Abseil's own definition of the member function whose mangled name, after the namespaces,
// is `rest` (for example "5Mutex4LockEv" for absl::Mutex::Lock()).
template <typename Function>
Function Real(const char* rest) {
  static void* const library =
      dlopen(("libabsl_synchronization.so." + std::to_string(ABSL_LTS_RELEASE_VERSION)).c_str(),
             RTLD_NOW | RTLD_NOLOAD);
  const std::string inline_namespace = ABSL_INTERNAL_TOKEN_STR(ABSL_OPTION_INLINE_NAMESPACE_NAME);
  const std::string name = "_ZN4absl" + std::to_string(inline_namespace.size()) +
                           inline_namespace + rest;
  void* symbol = library == nullptr ? nullptr : dlsym(library, name.c_str());
  if (symbol == nullptr) {
    std::fprintf(stderr, "tsan mutex annotations: %s not found in Abseil\n", name.c_str());
    std::abort();
  }
  return reinterpret_cast<Function>(symbol);
}

// The deadlock detector's lock graph is shared, uninstrumented state; it would be reported
// itself. Off, as in Abseil's release builds.
const bool deadlock_detection_off = [] {
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  return true;
}();

}  // namespace

// Races inside gRPC's own lock-free code (uninstrumented atomics) are gRPC's to find, with a
// TSan build of gRPC; they are reported against the project's memory when gRPC reads a buffer
// the project handed it. The project's code is not suppressed.
extern "C" const char* __tsan_default_suppressions() {
  return "race:libgrpc.so\n"
         "race:libgrpc++.so\n"
         "race:libgpr.so\n"
         "race:libprotobuf.so\n"
         "race:libabsl_\n"
         // OpenSSL (TLS): its locks are pthread rwlocks taken and freed inside the
         // uninstrumented library, seen half by TSan.
         "race:libcrypto.so\n"
         "race:libssl.so\n"
         "deadlock:libgrpc.so\n";
}

namespace absl {
ABSL_NAMESPACE_BEGIN

#define PS_ABSL_REAL(signature, rest)                        \
  static const auto real = Real<signature>(rest)

void Mutex::Lock() {
  PS_ABSL_REAL(void (*)(Mutex*), "5Mutex4LockEv");
  real(this);
  __tsan_acquire(this);
}

void Mutex::Unlock() {
  PS_ABSL_REAL(void (*)(Mutex*), "5Mutex6UnlockEv");
  __tsan_release(this);
  real(this);
}

bool Mutex::TryLock() {
  PS_ABSL_REAL(bool (*)(Mutex*), "5Mutex7TryLockEv");
  const bool locked = real(this);
  if (locked) __tsan_acquire(this);
  return locked;
}

void Mutex::ReaderLock() {
  PS_ABSL_REAL(void (*)(Mutex*), "5Mutex10ReaderLockEv");
  real(this);
  __tsan_acquire(this);
}

void Mutex::ReaderUnlock() {
  PS_ABSL_REAL(void (*)(Mutex*), "5Mutex12ReaderUnlockEv");
  __tsan_release(this);
  real(this);
}

bool Mutex::ReaderTryLock() {
  PS_ABSL_REAL(bool (*)(Mutex*), "5Mutex13ReaderTryLockEv");
  const bool locked = real(this);
  if (locked) __tsan_acquire(this);
  return locked;
}

void Mutex::LockWhen(const Condition& cond) {
  PS_ABSL_REAL(void (*)(Mutex*, const Condition&), "5Mutex8LockWhenERKNS0_9ConditionE");
  real(this, cond);
  __tsan_acquire(this);
}

bool Mutex::LockWhenWithTimeout(const Condition& cond, absl::Duration timeout) {
  PS_ABSL_REAL(bool (*)(Mutex*, const Condition&, absl::Duration),
               "5Mutex19LockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  const bool result = real(this, cond, timeout);
  __tsan_acquire(this);
  return result;
}

bool Mutex::LockWhenWithDeadline(const Condition& cond, absl::Time deadline) {
  PS_ABSL_REAL(bool (*)(Mutex*, const Condition&, absl::Time),
               "5Mutex20LockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  const bool result = real(this, cond, deadline);
  __tsan_acquire(this);
  return result;
}

void Mutex::ReaderLockWhen(const Condition& cond) {
  PS_ABSL_REAL(void (*)(Mutex*, const Condition&), "5Mutex14ReaderLockWhenERKNS0_9ConditionE");
  real(this, cond);
  __tsan_acquire(this);
}

// Await and CondVar waits give the lock up while they wait and take it back before returning.
void Mutex::Await(const Condition& cond) {
  PS_ABSL_REAL(void (*)(Mutex*, const Condition&), "5Mutex5AwaitERKNS0_9ConditionE");
  __tsan_release(this);
  real(this, cond);
  __tsan_acquire(this);
}

bool Mutex::AwaitWithTimeout(const Condition& cond, absl::Duration timeout) {
  PS_ABSL_REAL(bool (*)(Mutex*, const Condition&, absl::Duration),
               "5Mutex16AwaitWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  __tsan_release(this);
  const bool result = real(this, cond, timeout);
  __tsan_acquire(this);
  return result;
}

bool Mutex::AwaitWithDeadline(const Condition& cond, absl::Time deadline) {
  PS_ABSL_REAL(bool (*)(Mutex*, const Condition&, absl::Time),
               "5Mutex17AwaitWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  __tsan_release(this);
  const bool result = real(this, cond, deadline);
  __tsan_acquire(this);
  return result;
}

void CondVar::Wait(Mutex* mu) {
  PS_ABSL_REAL(void (*)(CondVar*, Mutex*), "7CondVar4WaitEPNS0_5MutexE");
  __tsan_release(mu);
  real(this, mu);
  __tsan_acquire(mu);
}

bool CondVar::WaitWithTimeout(Mutex* mu, absl::Duration timeout) {
  PS_ABSL_REAL(bool (*)(CondVar*, Mutex*, absl::Duration),
               "7CondVar15WaitWithTimeoutEPNS0_5MutexENS0_8DurationE");
  __tsan_release(mu);
  const bool result = real(this, mu, timeout);
  __tsan_acquire(mu);
  return result;
}

bool CondVar::WaitWithDeadline(Mutex* mu, absl::Time deadline) {
  PS_ABSL_REAL(bool (*)(CondVar*, Mutex*, absl::Time),
               "7CondVar16WaitWithDeadlineEPNS0_5MutexENS0_4TimeE");
  __tsan_release(mu);
  const bool result = real(this, mu, deadline);
  __tsan_acquire(mu);
  return result;
}

#undef PS_ABSL_REAL

ABSL_NAMESPACE_END
}  // namespace absl
