#include "common/testing/fault_injecting_file_system.h"

#include <memory>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace ps {
namespace {

// A file of `File`'s kind that meets its file system's write faults before reaching the real
// one. An injected fault leaves an atomic file uncommitted, so its path keeps what it held.
template <typename File>
class FaultInjecting : public File {
 public:
  FaultInjecting(FaultInjectingFileSystem* fs, std::string path, std::unique_ptr<File> file)
      : fs_(fs), path_(std::move(path)), file_(std::move(file)) {}

 protected:
  // `call` on the real file, unless a write (or, for a sync, a sync) fault is injected for
  // the path.
  template <typename Call>
  absl::Status Checked(Call call, bool sync = false) {
    absl::Status injected =
        sync ? fs_->InjectedSyncError(path_) : fs_->InjectedWriteError(path_);
    return injected.ok() ? call(*file_) : injected;
  }

 private:
  FaultInjectingFileSystem* const fs_;
  const std::string path_;
  const std::unique_ptr<File> file_;
};

class FaultInjectingAppendableFile : public FaultInjecting<AppendableFile> {
 public:
  using FaultInjecting::FaultInjecting;
  absl::Status Append(absl::string_view data) override {
    return Checked([data](AppendableFile& file) { return file.Append(data); });
  }
  absl::Status Flush() override {
    return Checked([](AppendableFile& file) { return file.Flush(); }, /*sync=*/true);
  }
};

class FaultInjectingAtomicFile : public FaultInjecting<AtomicFile> {
 public:
  using FaultInjecting::FaultInjecting;
  absl::Status Append(absl::string_view data) override {
    return Checked([data](AtomicFile& file) { return file.Append(data); });
  }
  absl::Status Commit() override {
    return Checked([](AtomicFile& file) { return file.Commit(); }, /*sync=*/true);
  }
};

}  // namespace

void FaultInjectingFileSystem::FailWrites(const std::string& suffix, int error_number) {
  absl::MutexLock lock(&mu_);
  failing_write_suffixes_.insert(suffix);
  write_error_number_ = error_number;
}

void FaultInjectingFileSystem::FailSyncs(const std::string& suffix, int error_number) {
  absl::MutexLock lock(&mu_);
  failing_sync_suffixes_.insert(suffix);
  sync_error_number_ = error_number;
}

void FaultInjectingFileSystem::HideFiles(const std::string& suffix) {
  absl::MutexLock lock(&mu_);
  hidden_suffixes_.insert(suffix);
}

void FaultInjectingFileSystem::ClearFaults() {
  absl::MutexLock lock(&mu_);
  failing_write_suffixes_.clear();
  failing_sync_suffixes_.clear();
  hidden_suffixes_.clear();
}

int FaultInjectingFileSystem::failed_writes() const {
  absl::MutexLock lock(&mu_);
  return failed_writes_;
}

bool FaultInjectingFileSystem::Matches(const std::set<std::string>& suffixes,
                                       const std::string& path) {
  for (const std::string& suffix : suffixes) {
    if (absl::EndsWith(path, suffix)) return true;
  }
  return false;
}

absl::StatusOr<std::string> FaultInjectingFileSystem::ReadFile(const std::string& path) {
  {
    absl::MutexLock lock(&mu_);
    if (Matches(hidden_suffixes_, path)) {
      return absl::ErrnoToStatus(ENOENT, absl::StrCat("cannot read ", path));
    }
  }
  return FileSystem::Default()->ReadFile(path);
}

absl::Status FaultInjectingFileSystem::InjectedWriteError(const std::string& path) {
  absl::MutexLock lock(&mu_);
  if (!Matches(failing_write_suffixes_, path)) return absl::OkStatus();
  ++failed_writes_;
  return absl::ErrnoToStatus(write_error_number_, absl::StrCat("cannot write ", path));
}

absl::Status FaultInjectingFileSystem::InjectedSyncError(const std::string& path) {
  absl::Status write = InjectedWriteError(path);
  if (!write.ok()) return write;
  absl::MutexLock lock(&mu_);
  if (!Matches(failing_sync_suffixes_, path)) return absl::OkStatus();
  ++failed_writes_;
  return absl::ErrnoToStatus(sync_error_number_, absl::StrCat("cannot sync ", path));
}

absl::Status FaultInjectingFileSystem::WriteFileAtomically(const std::string& path,
                                                           absl::string_view contents) {
  absl::Status injected = InjectedWriteError(path);
  if (!injected.ok()) return injected;
  return FileSystem::Default()->WriteFileAtomically(path, contents);
}

absl::StatusOr<std::unique_ptr<AtomicFile>> FaultInjectingFileSystem::NewAtomicFile(
    const std::string& path) {
  absl::StatusOr<std::unique_ptr<AtomicFile>> file = FileSystem::Default()->NewAtomicFile(path);
  if (!file.ok()) return file.status();
  return std::make_unique<FaultInjectingAtomicFile>(this, path, *std::move(file));
}

absl::StatusOr<std::unique_ptr<AppendableFile>> FaultInjectingFileSystem::NewAppendableFile(
    const std::string& path) {
  absl::StatusOr<std::unique_ptr<AppendableFile>> file =
      FileSystem::Default()->NewAppendableFile(path);
  if (!file.ok()) return file.status();
  return std::make_unique<FaultInjectingAppendableFile>(this, path, *std::move(file));
}

absl::Status FaultInjectingFileSystem::CreateDirectories(const std::string& path) {
  return FileSystem::Default()->CreateDirectories(path);
}

absl::StatusOr<std::vector<std::string>> FaultInjectingFileSystem::ListDirectory(
    const std::string& path) {
  return FileSystem::Default()->ListDirectory(path);
}

absl::Status FaultInjectingFileSystem::DeleteRecursively(const std::string& path) {
  return FileSystem::Default()->DeleteRecursively(path);
}

}  // namespace ps
