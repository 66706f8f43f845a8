#include "common/testing/fault_injecting_file_system.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace ps {

void FaultInjectingFileSystem::FailWrites(const std::string& suffix, int error_number) {
  absl::MutexLock lock(&mu_);
  failing_write_suffixes_.insert(suffix);
  write_error_number_ = error_number;
}

void FaultInjectingFileSystem::HideFiles(const std::string& suffix) {
  absl::MutexLock lock(&mu_);
  hidden_suffixes_.insert(suffix);
}

void FaultInjectingFileSystem::ClearFaults() {
  absl::MutexLock lock(&mu_);
  failing_write_suffixes_.clear();
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

absl::Status FaultInjectingFileSystem::WriteFileAtomically(const std::string& path,
                                                           absl::string_view contents) {
  {
    absl::MutexLock lock(&mu_);
    if (Matches(failing_write_suffixes_, path)) {
      ++failed_writes_;
      return absl::ErrnoToStatus(write_error_number_, absl::StrCat("cannot write ", path));
    }
  }
  return FileSystem::Default()->WriteFileAtomically(path, contents);
}

absl::Status FaultInjectingFileSystem::CreateDirectories(const std::string& path) {
  return FileSystem::Default()->CreateDirectories(path);
}

}  // namespace ps
