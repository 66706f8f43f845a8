#include "common/job/shared_memory_rule.h"

#include "common/job/consistency_modes.h"

namespace ps {

std::string WhyNoSharedMemory(const ParameterSpec& spec) {
  if (spec.replicas() > 1) return "the job is replicated: its calls may move to another ps";
  if (!spec.sparse_tables().empty()) return "the job has sparse tables";
  if (spec.compression().encoding() != FLOAT32 || spec.compression().topk_fraction() > 0) {
    return "the job compresses its values";
  }
  const ModeTraits* mode = FindModeTraits(spec.consistency().mode());
  if (mode == nullptr || mode->family != ModeFamily::kPs) {
    return "the job's workers exchange with each other, not with the shards";
  }
  return "";
}

}  // namespace ps
