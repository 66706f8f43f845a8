#include "common/process/flag_help.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include <gflags/gflags.h>
#include <glog/logging.h>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/did_you_mean.h"

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

std::string UnknownFlagMessage(int argc, char** argv, const std::string& program) {
  // Each flag's name ("worker" of "--worker=3"), up to "--"; a known flag's value given as the
  // next word ("--job -x") is passed over, as gflags takes it.
  std::vector<std::string> unknown;
  for (int i = 1; i < argc; ++i) {
    absl::string_view arg = argv[i];
    if (arg == "--") break;
    double number;
    if (arg.size() < 2 || arg[0] != '-' || absl::SimpleAtod(arg, &number)) continue;
    arg.remove_prefix(arg[1] == '-' ? 2 : 1);
    const size_t equals = arg.find('=');
    const std::string name(arg.substr(0, equals));
    if (name == "undefok") return "";  // gflags lets the unknown flags it lists pass.
    gflags::CommandLineFlagInfo info;
    if (name.empty()) continue;
    if (gflags::GetCommandLineFlagInfo(name.c_str(), &info)) {
      if (equals == absl::string_view::npos && info.type != "bool") ++i;  // Its value.
      continue;
    }
    if (absl::StartsWith(name, "no") &&
        gflags::GetCommandLineFlagInfo(name.substr(2).c_str(), &info) && info.type == "bool") {
      continue;
    }
    unknown.push_back(name);
  }
  if (unknown.empty()) return "";
  std::vector<gflags::CommandLineFlagInfo> flags;
  gflags::GetAllFlags(&flags);
  std::vector<std::string> known;
  for (const gflags::CommandLineFlagInfo& flag : flags) known.push_back(flag.name);
  return absl::StrCat("unknown flag --", unknown[0], DidYouMean(unknown[0], known, "--"), "; ",
                      program, " --help lists the flags");
}

void ParseFlags(int* argc, char*** argv) {
  // gflags knows the program's name only once it has parsed.
  const std::string program = std::filesystem::path((*argv)[0]).filename().string();
  const std::string unknown = UnknownFlagMessage(*argc, *argv, program);
  if (!unknown.empty()) {
    std::cerr << program << ": " << unknown << "\n";
    std::exit(2);
  }
  // gflags exits through this hook, which libgflags exports without declaring it.
  void (*const gflags_exit)(int) = google::gflags_exitfunc;
  google::gflags_exitfunc = &ExitForBadInput;
  gflags::ParseCommandLineFlags(argc, argv, /*remove_flags=*/true);
  google::gflags_exitfunc = gflags_exit;
}

}  // namespace ps
