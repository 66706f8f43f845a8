// Fuzzes the ClusterSpec JSON parser (--cluster_spec files and TF_CONFIG): any text is a spec
// or an INVALID_ARGUMENT, and a spec that parses prints (ToJson) to JSON that parses back to the
// same spec.
#include <string>
#include <vector>

#include <glog/logging.h>

#include "common/cluster/cluster_spec.h"
#include "common/testing/fuzz_target.h"

namespace ps {

std::vector<std::string> FuzzSeeds() {
  return {
      R"({"cluster": {"ps": ["h1:2222", "h2:2222"], "worker": ["h3:2222"]},
          "task": {"type": "ps", "index": 1}})",
      R"({"ps": ["[::1]:2222"], "worker": ["localhost:2223", "10.0.0.3:2224"]})",
      R"({"cluster": {"ps": [], "worker": ["a:1"]}})",
  };
}

}  // namespace ps

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::StatusOr<ps::ClusterSpec> spec = ps::ClusterSpec::Parse(ps::AsText(data, size), "fuzz");
  if (!spec.ok()) {
    CHECK(absl::IsInvalidArgument(spec.status())) << spec.status();
    return 0;
  }
  const std::string json = spec->ToJson(spec->task());
  absl::StatusOr<ps::ClusterSpec> again = ps::ClusterSpec::Parse(json, "ToJson");
  CHECK(again.ok()) << again.status() << "\n" << json;
  CHECK_EQ(again->ToJson(again->task()), json);
  CHECK(again->ToProto().SerializeAsString() == spec->ToProto().SerializeAsString());
  return 0;
}
