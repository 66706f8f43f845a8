#include "worker/data/data_roots.h"

#include <filesystem>
#include <system_error>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace ps {
namespace {

// `path` absolute, with symbolic links followed as far as it exists and "." and ".." resolved.
std::string Resolve(const std::string& path) {
  std::error_code error;
  std::filesystem::path absolute = std::filesystem::absolute(path, error);
  if (error) return "";
  std::filesystem::path resolved = std::filesystem::weakly_canonical(absolute, error);
  return error ? "" : resolved.string();
}

}  // namespace

absl::StatusOr<DataRoots> DataRoots::Create(const std::vector<std::string>& roots) {
  DataRoots result;
  for (const std::string& root : roots) {
    std::error_code error;
    if (root.empty() || !std::filesystem::is_directory(root, error)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--data_root=", root, ": not a directory on this host"));
    }
    result.roots_.push_back(Resolve(root));
  }
  return result;
}

absl::Status DataRoots::Check(const std::string& path, absl::string_view field) const {
  const std::string resolved = Resolve(path);
  for (const std::string& root : roots_) {
    if (!resolved.empty() &&
        (resolved == root || absl::StartsWith(resolved, root == "/" ? root : root + "/"))) {
      return absl::OkStatus();
    }
  }
  if (roots_.empty()) {
    return absl::PermissionDeniedError(absl::StrCat(
        field, " \"", path,
        "\": this worker reads no data files (it was started without "
        "--data_root); start ps_worker with --data_root=DIR naming the directory that holds "
        "them, or use synthetic data"));
  }
  return absl::PermissionDeniedError(
      absl::StrCat(field, " \"", path, "\" is outside this worker's data directories (",
                   absl::StrJoin(roots_, ", "),
                   "); put the file under one of them, or start ps_worker with "
                   "--data_root naming its directory"));
}

}  // namespace ps
