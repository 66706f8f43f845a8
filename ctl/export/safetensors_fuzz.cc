// Fuzzes the safetensors reader (psctl import and restore read model files a user hands in):
// any bytes are tensors or DATA_LOSS, and what is read writes back and reads again to the same
// tensors. (The project writes .npy files but never reads them: this is its model reader.)
#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <glog/logging.h>

#include "absl/base/casts.h"
#include "common/file_system.h"
#include "ctl/export/safetensors.h"
#include "common/testing/fuzz_target.h"

namespace ps {
namespace {

std::string FileBytes(const std::string& path) {
  absl::StatusOr<std::string> bytes = FileSystem::Default()->ReadFile(path);
  CHECK(bytes.ok()) << bytes.status();
  return *bytes;
}

// Writes `entries` (and `metadata`) with WriteSafetensors to this thread's fuzz file.
std::string Written(const std::map<std::string, SafetensorsEntry>& entries,
                    const std::map<std::string, std::string>& metadata) {
  std::vector<SafetensorsTensor> tensors;
  for (const auto& [name, entry] : entries) tensors.push_back({name, entry.shape, entry.values});
  const std::string path = WriteFuzzFile("", ".rewritten.safetensors");
  absl::Status written = WriteSafetensors(path, tensors, metadata);
  CHECK(written.ok()) << written;
  return path;
}

}  // namespace

std::vector<std::string> FuzzSeeds() {
  const std::vector<float> w = {1, 2, 3, 4, 5, 6};
  const std::vector<float> b = {0.5f};
  std::map<std::string, SafetensorsEntry> entries = {{"layer0/w", {{2, 3}, w}},
                                                     {"layer0/b", {{1}, b}},
                                                     {"empty", {{0, 4}, {}}}};
  return {FileBytes(Written(entries, {{"step", "100"}})), FileBytes(Written(entries, {}))};
}

}  // namespace ps

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = ps::WriteFuzzFile(ps::AsText(data, size), ".safetensors");
  std::map<std::string, std::string> metadata;
  absl::StatusOr<std::map<std::string, ps::SafetensorsEntry>> read =
      ps::ReadSafetensors(path, &metadata);
  if (!read.ok()) {
    CHECK(absl::IsDataLoss(read.status())) << read.status();
    return 0;
  }
  std::map<std::string, std::string> metadata_again;
  absl::StatusOr<std::map<std::string, ps::SafetensorsEntry>> again =
      ps::ReadSafetensors(ps::Written(*read, metadata), &metadata_again);
  CHECK(again.ok()) << again.status();
  CHECK(metadata_again == metadata);
  CHECK_EQ(again->size(), read->size());
  for (const auto& [name, entry] : *read) {
    const ps::SafetensorsEntry& other = again->at(name);
    CHECK(other.shape == entry.shape) << name;
    // Bit for bit (NaN payloads included).
    CHECK(std::equal(entry.values.begin(), entry.values.end(), other.values.begin(),
                     other.values.end(), [](float a, float b) {
                       return absl::bit_cast<uint32_t>(a) == absl::bit_cast<uint32_t>(b);
                     }))
        << name;
  }
  return 0;
}
