// What a binary was built from, for --version and results: the version (common/process/version.h),
// the git commit and time of a stamped build (tools/release.sh builds with --config=release, which
// stamps; other builds say they are unstamped), and whether it was optimized.
#ifndef PS_COMMON_PROCESS_BUILD_INFO_H_
#define PS_COMMON_PROCESS_BUILD_INFO_H_

#include <string>

namespace ps {

// "0.1.0 (commit 4391dfc8fff9, built 2026-11-23T17:31:21Z, optimized)"; an unstamped build
// says "commit unknown: an unstamped build" instead, and a fastbuild "unoptimized".
std::string VersionString();

// The commit of a stamped build ("4391dfc8fff9", with "-modified" when the tree had changes);
// empty when unstamped.
std::string BuildCommit();

// Whether the code was compiled with optimization (-c opt, or -O2 and up).
bool OptimizedBuild();

// Sets VersionString() as what gflags prints for --version ("ps_server version 0.1.0 (...)").
// Call before gflags::ParseCommandLineFlags.
void SetVersionFlag();

}  // namespace ps

#endif  // PS_COMMON_PROCESS_BUILD_INFO_H_
