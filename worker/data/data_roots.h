// The directories a worker may read data files from (ps_worker --data_root). A job names its
// files, and a job comes over the network, so without this any caller could make a worker open
// any file it can read. Paths are resolved before they are compared (made absolute, symbolic
// links and ".." followed), so neither a relative path nor a link leads out of a root.
#ifndef PS_WORKER_DATA_DATA_ROOTS_H_
#define PS_WORKER_DATA_DATA_ROOTS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ps {

class DataRoots {
 public:
  // No root: no data file may be read (synthetic data only).
  DataRoots() = default;
  // INVALID_ARGUMENT naming a root that is not an existing directory.
  static absl::StatusOr<DataRoots> Create(const std::vector<std::string>& roots);

  // OK when `path` resolves to a place under a root (whether or not a file is there: the reader
  // then says NOT_FOUND). Else PERMISSION_DENIED naming `field`, the path and the roots, and
  // saying which flag to change; never anything of the file.
  absl::Status Check(const std::string& path, absl::string_view field) const;

  const std::vector<std::string>& roots() const { return roots_; }

 private:
  std::vector<std::string> roots_;  // Resolved.
};

}  // namespace ps

#endif  // PS_WORKER_DATA_DATA_ROOTS_H_
