// Loading the CUDA plugin (cuda_plugin.h): what a program says where it is missing, is not
// loadable (CUDA's libraries missing: here a file that is no library) or is not the plugin,
// and that a CUDA build finds its own. The loader keeps its first answer for the process, so
// each case runs in a child process of its own (a death test that exits 0).
#include "worker/compute/cuda_plugin.h"

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "worker/compute/device.h"

namespace ps {
namespace {

// In a child: loads with PS_CUDA_LIBRARY=`path` ("" to leave it unset), prints the error to
// stderr and exits 0.
void LoadAndSay(const std::string& path) {
  if (path.empty()) {
    unsetenv("PS_CUDA_LIBRARY");
  } else {
    setenv("PS_CUDA_LIBRARY", path.c_str(), 1);
  }
  std::string error;
  const CudaPlugin* plugin = LoadCudaPlugin(&error);
  std::cerr << (plugin != nullptr ? "loaded" : "error: " + error) << std::endl;
  std::exit(0);
}

TEST(CudaPluginDeathTest, AMissingPluginIsNamedWithWhereItWasLookedFor) {
  EXPECT_EXIT(LoadAndSay("/nonexistent/libps_cuda.so"), ::testing::ExitedWithCode(0),
              "error: the CUDA backend, libps_cuda.so, is not installed \\(looked at "
              "/nonexistent/libps_cuda.so; PS_CUDA_LIBRARY names it\\)");
}

TEST(CudaPluginDeathTest, APluginThatCannotBeLoadedSaysWhyAndWhatItNeeds) {
  const std::string path = std::string(std::getenv("TEST_TMPDIR")) + "/libps_cuda.so";
  std::ofstream(path) << "not a library";
  EXPECT_EXIT(LoadAndSay(path), ::testing::ExitedWithCode(0),
              "error: cannot load the CUDA backend .*libps_cuda.so: .* \\(CUDA's runtime and "
              "cuBLAS must be on the loader's path");
}

TEST(CudaPluginDeathTest, ALibraryThatIsNotThePluginIsRefused) {
  // A shared library every program here loads: gcc's runtime, not the plugin.
  const char* library = "/lib/x86_64-linux-gnu/libgcc_s.so.1";
  if (std::ifstream(library).fail()) GTEST_SKIP() << library << " is not here";
  EXPECT_EXIT(LoadAndSay(library), ::testing::ExitedWithCode(0),
              "is not this build's CUDA backend \\(it lacks PsCudaPluginVersion, "
              "PsCudaQueryGpus or PsCudaNewBackend\\)");
}

TEST(CudaPluginDeathTest, ARelativePathIsNotTried) {
  EXPECT_EXIT(LoadAndSay("libps_cuda.so"), ::testing::ExitedWithCode(0),
              "is not installed \\(looked at libps_cuda.so \\(not an absolute path: skipped\\)");
}

TEST(CudaPluginDeathTest, ACudaBuildFindsItsPluginInItsRunfiles) {
  if (!BuiltWithCuda()) GTEST_SKIP() << "built without CUDA: no plugin";
  // Loadable where CUDA's libraries are (the build's CUDA_HOME, which the plugin's rpath names).
  EXPECT_EXIT(LoadAndSay(""), ::testing::ExitedWithCode(0), "loaded");
}

}  // namespace
}  // namespace ps
