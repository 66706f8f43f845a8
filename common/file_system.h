// The seam between the code and the disk, as LevelDB's Env: whole-file reads, atomic writes
// and directories go through a FileSystem, so tests inject a failed write, a full disk or a
// missing file (common/testing/fault_injecting_file_system.h) without making one.
#ifndef PS_COMMON_FILE_SYSTEM_H_
#define PS_COMMON_FILE_SYSTEM_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ps {

// A file written in pieces, for files that grow while a job runs (metrics.csv). Not
// thread-safe. Errors name the path, as FileSystem's do.
class AppendableFile {
 public:
  // Closes the file.
  virtual ~AppendableFile() = default;

  virtual absl::Status Append(absl::string_view data) = 0;
  // Hands what was appended to the operating system, so that readers see it (no fsync).
  virtual absl::Status Flush() = 0;
};

// A file written in pieces that replaces `path` all at once when committed: written to a
// temporary file beside it ("<path>.tmp.<host>.<random>.<n>", its own), flushed to the disk
// (fsync), renamed over `path`, and the directory synced; for files too large to build whole
// in memory first (checkpoints).
// Destroyed without a successful Commit, the temporary file is removed and `path` keeps what it
// held. Not thread-safe. Errors name the path, as FileSystem's do.
class AtomicFile {
 public:
  virtual ~AtomicFile() = default;

  virtual absl::Status Append(absl::string_view data) = 0;
  // REQUIRES: called once, after every Append.
  virtual absl::Status Commit() = 0;
};

// Implementations are thread-safe. Every error message names the path and the system's reason;
// the code follows the errno (absl::ErrnoToStatus): NOT_FOUND for a missing file,
// PERMISSION_DENIED, RESOURCE_EXHAUSTED for a full disk (ENOSPC) or quota.
class FileSystem {
 public:
  virtual ~FileSystem() = default;

  // The machine's own file system. Never null; never deleted.
  static FileSystem* Default();

  // The bytes of the file at `path`.
  virtual absl::StatusOr<std::string> ReadFile(const std::string& path) = 0;
  // Replaces the file at `path` with `contents` all at once: written to a temporary file beside
  // it ("<path>.tmp.<host>.<random>.<n>", of this writer alone), flushed to the disk (fsync),
  // renamed over `path`, and the directory synced. On failure `path` keeps what it held and the
  // temporary file is removed. Writers of one path at once (ps daemons sharing a checkpoint
  // directory) each rename a whole file of their own: `path` ends as one of them wrote it.
  virtual absl::Status WriteFileAtomically(const std::string& path,
                                           absl::string_view contents) = 0;
  // A new file to replace `path` atomically (see AtomicFile); writers of one path at once each
  // have their own temporary file, as in WriteFileAtomically.
  virtual absl::StatusOr<std::unique_ptr<AtomicFile>> NewAtomicFile(const std::string& path) = 0;
  // Creates the file at `path`, or empties it, for appending.
  virtual absl::StatusOr<std::unique_ptr<AppendableFile>> NewAppendableFile(
      const std::string& path) = 0;
  // Creates the directory `path` and its missing parents; OK when it exists.
  virtual absl::Status CreateDirectories(const std::string& path) = 0;
  // The names of the entries of directory `path` (files and directories), sorted.
  virtual absl::StatusOr<std::vector<std::string>> ListDirectory(const std::string& path) = 0;
  // Removes `path` and, if it is a directory, everything under it; OK when it does not exist.
  virtual absl::Status DeleteRecursively(const std::string& path) = 0;
};

}  // namespace ps

#endif  // PS_COMMON_FILE_SYSTEM_H_
