#include "common/process/build_info.h"

#include <gflags/gflags.h>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/process/version.h"

namespace ps {

// Written by the genrule build_stamp (common/BUILD) from Bazel's workspace status.
extern const char kBuildCommit[];
extern const long long kBuildTimestamp;  // Seconds since the epoch; 0 when unstamped.

std::string BuildCommit() { return kBuildCommit; }

bool OptimizedBuild() {
#ifdef __OPTIMIZE__
  return true;
#else
  return false;
#endif
}

std::string VersionString() {
  std::string built;
  if (BuildCommit().empty()) {
    built = "commit unknown: an unstamped build";
  } else {
    built = absl::StrCat(
        "commit ", BuildCommit(), ", built ",
        absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::FromUnixSeconds(kBuildTimestamp),
                         absl::UTCTimeZone()));
  }
  return absl::StrCat(kVersion, " (", built, ", ", OptimizedBuild() ? "optimized" : "unoptimized",
                      ")");
}

void SetVersionFlag() { gflags::SetVersionString(VersionString()); }

}  // namespace ps
