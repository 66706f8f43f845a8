#include "common/machine_info.h"

#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace ps {
namespace {

// The whole file, or empty when it cannot be read.
std::string ReadText(const std::string& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

// The value after the first "key:" line's colon, trimmed; empty when no line has it.
std::string ValueOf(absl::string_view text, absl::string_view key) {
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    size_t colon = line.find(':');
    if (colon == absl::string_view::npos) continue;
    if (absl::StripAsciiWhitespace(line.substr(0, colon)) == key) {
      return std::string(absl::StripAsciiWhitespace(line.substr(colon + 1)));
    }
  }
  return "";
}

}  // namespace

std::string CpuModelFromCpuinfo(absl::string_view cpuinfo) {
  return ValueOf(cpuinfo, "model name");
}

int64_t MemTotalFromMeminfo(absl::string_view meminfo) {
  // "MemTotal:       24578148 kB"
  std::vector<absl::string_view> words =
      absl::StrSplit(ValueOf(meminfo, "MemTotal"), ' ', absl::SkipEmpty());
  int64_t kib = 0;
  if (words.empty() || !absl::SimpleAtoi(words[0], &kib) || kib < 0) return 0;
  return kib * 1024;
}

std::string GpuModelFromInformation(absl::string_view information) {
  return ValueOf(information, "Model");
}

std::string DriverVersionFromNvidiaVersion(absl::string_view version) {
  absl::string_view first_line = version.substr(0, version.find('\n'));
  // The first word made of digits and dots, with at least one dot.
  for (absl::string_view word : absl::StrSplit(first_line, ' ', absl::SkipEmpty())) {
    bool version_like = absl::StrContains(word, '.') && std::isdigit(word.front());
    for (char c : word) version_like = version_like && (std::isdigit(c) || c == '.');
    if (version_like) return std::string(word);
  }
  return "";
}

MachineInfo DescribeMachine() {
  MachineInfo machine;
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) == 0) machine.set_hostname(host);
  machine.set_cpu_model(CpuModelFromCpuinfo(ReadText("/proc/cpuinfo")));
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  machine.set_cores(cores > 0 ? static_cast<int>(cores) : 0);
  machine.set_memory_bytes(MemTotalFromMeminfo(ReadText("/proc/meminfo")));
  struct utsname name;
  if (uname(&name) == 0) machine.set_kernel(absl::StrCat(name.sysname, " ", name.release));
  std::error_code error;
  const std::filesystem::path gpus = "/proc/driver/nvidia/gpus";
  if (std::filesystem::is_directory(gpus, error)) {
    std::vector<std::string> models;
    for (const auto& entry : std::filesystem::directory_iterator(gpus, error)) {
      std::string model = GpuModelFromInformation(ReadText(entry.path() / "information"));
      if (!model.empty()) models.push_back(model);
    }
    std::sort(models.begin(), models.end());  // Bus order, as the directory names sort.
    for (std::string& model : models) machine.add_gpus(std::move(model));
    machine.set_gpu_driver(DriverVersionFromNvidiaVersion(ReadText("/proc/driver/nvidia/version")));
  }
  return machine;
}

}  // namespace ps
