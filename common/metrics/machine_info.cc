#include "common/metrics/machine_info.h"

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

int64_t CgroupMemoryLimit(absl::string_view proc_self_cgroup,
                          const std::function<std::string(const std::string&)>& read_file) {
  int64_t lowest = 0;
  auto consider = [&](const std::string& path) {
    const std::string text(absl::StripAsciiWhitespace(read_file(path)));
    int64_t bytes = 0;
    // No limit reads "max" (v2) or a number near 2^63 (v1): anything past 2^62 is none.
    if (!absl::SimpleAtoi(text, &bytes) || bytes <= 0 || bytes > (int64_t{1} << 62)) return;
    if (lowest == 0 || bytes < lowest) lowest = bytes;
  };
  // Lines "ID:CONTROLLERS:PATH": v2's "0::/path", v1's "4:memory:/path".
  for (absl::string_view line : absl::StrSplit(proc_self_cgroup, '\n', absl::SkipEmpty())) {
    std::vector<absl::string_view> fields = absl::StrSplit(line, absl::MaxSplits(':', 2));
    if (fields.size() != 3 || absl::StrContains(fields[2], "..")) continue;
    const std::string group = fields[2] == "/" ? "" : std::string(fields[2]);
    if (fields[0] == "0" && fields[1].empty()) {
      consider("/sys/fs/cgroup" + group + "/memory.max");
      consider("/sys/fs/cgroup/memory.max");
    }
    for (absl::string_view controller : absl::StrSplit(fields[1], ',')) {
      if (controller != "memory") continue;
      consider("/sys/fs/cgroup/memory" + group + "/memory.limit_in_bytes");
      consider("/sys/fs/cgroup/memory/memory.limit_in_bytes");
    }
  }
  return lowest;
}

int64_t UsableMemoryBytes() {
  const int64_t machine = MemTotalFromMeminfo(ReadText("/proc/meminfo"));
  const int64_t cgroup = CgroupMemoryLimit(ReadText("/proc/self/cgroup"), ReadText);
  if (machine == 0 || (cgroup > 0 && cgroup < machine)) return cgroup;
  return machine;
}

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
