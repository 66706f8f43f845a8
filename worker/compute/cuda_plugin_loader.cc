#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/process/version.h"
#include "worker/compute/cuda_plugin.h"

namespace ps {
namespace {

constexpr char kLibrary[] = "libps_cuda.so";
constexpr char kRunfilesPath[] = "ps/worker/compute/libps_cuda.so";  // Workspace "ps".

// Where the plugin may be, in order.
std::vector<std::string> Candidates() {
  if (const char* path = std::getenv("PS_CUDA_LIBRARY"); path != nullptr && *path != '\0') {
    return {path};
  }
  std::vector<std::string> candidates;
  std::error_code error;
  const std::filesystem::path program = std::filesystem::read_symlink("/proc/self/exe", error);
  if (!error) {
    candidates.push_back((program.parent_path().parent_path() / "lib" / "ps" / kLibrary).string());
    candidates.push_back(program.string() + ".runfiles/" + kRunfilesPath);
    // A program run from a runfiles tree (a test's data): that tree's root.
    const std::string path = program.string();
    const size_t at = path.find(".runfiles/");
    if (at != std::string::npos) {
      candidates.push_back(path.substr(0, at + 10) + kRunfilesPath);
    }
  }
  for (const char* variable : {"RUNFILES_DIR", "TEST_SRCDIR"}) {
    if (const char* dir = std::getenv(variable); dir != nullptr && *dir != '\0') {
      candidates.push_back(absl::StrCat(dir, "/", kRunfilesPath));
    }
  }
  return candidates;
}

struct Loaded {
  CudaPlugin plugin;
  bool ok = false;
  std::string error;
};

Loaded Load() {
  Loaded loaded;
  std::vector<std::string> tried;
  const std::string version = absl::StrCat(kVersion, "/", kCudaPluginInterface);
  for (const std::string& path : Candidates()) {
    if (!std::filesystem::path(path).is_absolute()) {
      tried.push_back(absl::StrCat(path, " (not an absolute path: skipped)"));
      continue;
    }
    if (!std::filesystem::exists(path)) {
      tried.push_back(path);
      continue;
    }
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      // Found but not loadable: CUDA's own libraries are missing (libcublas.so.N, ...).
      loaded.error = absl::StrCat("cannot load the CUDA backend ", path, ": ", dlerror(),
                                  " (CUDA's runtime and cuBLAS must be on the loader's path, for "
                                  "example from the CUDA toolkit in /usr/local/cuda)");
      return loaded;
    }
    auto plugin_version = reinterpret_cast<const char* (*)()>(dlsym(handle, "PsCudaPluginVersion"));
    if (plugin_version != nullptr && plugin_version() != version) {
      loaded.error = absl::StrCat(path, " is the CUDA backend of release/interface ",
                                  plugin_version(), ", this program's is ", version,
                                  ": install the plugin of this program's release");
      return loaded;
    }
    loaded.plugin.query_gpus =
        reinterpret_cast<void (*)(GpuQueryResult*)>(dlsym(handle, "PsCudaQueryGpus"));
    loaded.plugin.new_backend = reinterpret_cast<ComputeBackend* (*)(int, std::string*)>(
        dlsym(handle, "PsCudaNewBackend"));
    if (plugin_version == nullptr || loaded.plugin.query_gpus == nullptr ||
        loaded.plugin.new_backend == nullptr) {
      loaded.error = absl::StrCat(path, " is not this build's CUDA backend (it lacks ",
                                  "PsCudaPluginVersion, PsCudaQueryGpus or PsCudaNewBackend)");
      return loaded;
    }
    loaded.ok = true;  // Kept loaded for the process's life.
    return loaded;
  }
  loaded.error = absl::StrCat("the CUDA backend, ", kLibrary, ", is not installed (looked at ",
                              absl::StrJoin(tried, ", "), "; PS_CUDA_LIBRARY names it)");
  return loaded;
}

}  // namespace

const CudaPlugin* LoadCudaPlugin(std::string* error) {
  static const Loaded* const loaded = new Loaded(Load());
  if (!loaded->ok) {
    *error = loaded->error;
    return nullptr;
  }
  return &loaded->plugin;
}

}  // namespace ps
