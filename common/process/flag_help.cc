#include "common/process/flag_help.h"

#include <algorithm>
#include <cstdlib>
#include <iostream>

#include <gflags/gflags.h>
#include <glog/logging.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

// libgflags' exit hook (gflags' util.h, not installed): gflags calls it to end the program on a
// bad command line.
namespace google {
extern void (*gflags_exitfunc)(int);
}  // namespace google

namespace ps {
namespace {

bool ProjectFile(const std::string& file) {
  for (const char* dir : {"common/", "server/", "worker/", "ctl/", "bench/"}) {
    if (absl::StartsWith(file, dir)) return true;
  }
  return false;
}

std::string OneFlag(const gflags::CommandLineFlagInfo& flag) {
  std::string value = flag.default_value;
  if (flag.type == "string") value = absl::StrCat("\"", value, "\"");
  return absl::StrCat("  --", flag.name, "=", value, "\n      ", flag.description, "\n");
}

}  // namespace

bool HelpRequested(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-help" || arg == "-h" || arg == "--helpshort") return true;
  }
  return false;
}

std::string FlagHelp(const std::vector<std::string>& names) {
  std::string text;
  if (names.empty()) {
    std::vector<gflags::CommandLineFlagInfo> flags;
    gflags::GetAllFlags(&flags);  // By file, then name.
    // The program's own (its main file's) first, then the shared ones.
    std::stable_partition(flags.begin(), flags.end(), [](const gflags::CommandLineFlagInfo& flag) {
      return absl::EndsWith(flag.filename, "_main.cc");
    });
    for (const gflags::CommandLineFlagInfo& flag : flags) {
      if (ProjectFile(flag.filename)) text += OneFlag(flag);
    }
    return text;
  }
  for (const std::string& name : names) {
    gflags::CommandLineFlagInfo flag;
    CHECK(gflags::GetCommandLineFlagInfo(name.c_str(), &flag)) << "no flag --" << name;
    text += OneFlag(flag);
  }
  return text;
}

void HandleHelp(int argc, char** argv, const std::string& usage,
                const std::vector<std::string>& names) {
  if (!HelpRequested(argc, argv)) return;
  std::cout << usage << "\n\nFlags:\n"
            << FlagHelp(names) << "\n(--helpfull lists every flag, the logging library's too)\n";
  std::exit(0);
}

namespace {

// gflags ends with 0 after --version or --helpfull, and 1 on a bad command line.
[[noreturn]] void ExitForBadInput(int gflags_code) { std::exit(gflags_code == 0 ? 0 : 2); }

}  // namespace

void ParseFlags(int* argc, char*** argv) {
  // gflags exits through this hook, which libgflags exports without declaring it.
  void (*const gflags_exit)(int) = google::gflags_exitfunc;
  google::gflags_exitfunc = &ExitForBadInput;
  gflags::ParseCommandLineFlags(argc, argv, /*remove_flags=*/true);
  google::gflags_exitfunc = gflags_exit;
}

}  // namespace ps
