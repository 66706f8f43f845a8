// A FileSystem for tests: the real one, but for faults the test injects by path: a write that
// fails (a full disk, ENOSPC, by default), a file that reads as missing.
#ifndef PS_COMMON_TESTING_FAULT_INJECTING_FILE_SYSTEM_H_
#define PS_COMMON_TESTING_FAULT_INJECTING_FILE_SYSTEM_H_

#include <cerrno>
#include <set>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/file_system.h"

namespace ps {

// Thread-safe. Faults match a path when it ends with the given suffix ("" matches every path),
// and stay until cleared. They reach appendable files already open too, at their next Append
// or Flush; such files must not outlive the file system.
class FaultInjectingFileSystem : public FileSystem {
 public:
  // Writes to paths ending in `suffix` fail with `error_number`, as the disk would report it,
  // and leave the file as it was.
  void FailWrites(const std::string& suffix, int error_number = ENOSPC) ABSL_LOCKS_EXCLUDED(mu_);
  // Syncs (an atomic file's Commit, a flush) of paths ending in `suffix` fail with
  // `error_number` (EIO: the disk lost the data), after the writes before them went through.
  void FailSyncs(const std::string& suffix, int error_number = EIO) ABSL_LOCKS_EXCLUDED(mu_);
  // Reads of paths ending in `suffix` fail as for a missing file (ENOENT).
  void HideFiles(const std::string& suffix) ABSL_LOCKS_EXCLUDED(mu_);
  void ClearFaults() ABSL_LOCKS_EXCLUDED(mu_);
  // Writes refused so far.
  int failed_writes() const ABSL_LOCKS_EXCLUDED(mu_);
  // The error a write of `path` meets now (counted as refused), or OK.
  absl::Status InjectedWriteError(const std::string& path) ABSL_LOCKS_EXCLUDED(mu_);
  // The error a sync of `path` meets now (a write fault, or a sync fault; counted), or OK.
  absl::Status InjectedSyncError(const std::string& path) ABSL_LOCKS_EXCLUDED(mu_);

  absl::StatusOr<std::string> ReadFile(const std::string& path) override;
  absl::Status WriteFileAtomically(const std::string& path, absl::string_view contents) override;
  absl::StatusOr<std::unique_ptr<AtomicFile>> NewAtomicFile(const std::string& path) override;
  absl::StatusOr<std::unique_ptr<AppendableFile>> NewAppendableFile(
      const std::string& path) override;
  absl::Status CreateDirectories(const std::string& path) override;
  absl::StatusOr<std::vector<std::string>> ListDirectory(const std::string& path) override;
  absl::Status DeleteRecursively(const std::string& path) override;

 private:
  static bool Matches(const std::set<std::string>& suffixes, const std::string& path);

  mutable absl::Mutex mu_;
  std::set<std::string> failing_write_suffixes_ ABSL_GUARDED_BY(mu_);
  int write_error_number_ ABSL_GUARDED_BY(mu_) = ENOSPC;
  std::set<std::string> failing_sync_suffixes_ ABSL_GUARDED_BY(mu_);
  int sync_error_number_ ABSL_GUARDED_BY(mu_) = EIO;
  std::set<std::string> hidden_suffixes_ ABSL_GUARDED_BY(mu_);
  int failed_writes_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace ps

#endif  // PS_COMMON_TESTING_FAULT_INJECTING_FILE_SYSTEM_H_
