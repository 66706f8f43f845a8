#include "common/job/shared_memory_rule.h"

#include <gtest/gtest.h>

namespace ps {
namespace {

ParameterSpec AsyncSpec() {
  ParameterSpec spec;
  spec.mutable_consistency()->set_mode(ConsistencyConfig::ASYNC);
  return spec;
}

TEST(SharedMemoryRuleTest, ADenseFloat32PsJobMayUseIt) {
  EXPECT_EQ(WhyNoSharedMemory(AsyncSpec()), "");
  ParameterSpec sync = AsyncSpec();
  sync.mutable_consistency()->set_mode(ConsistencyConfig::SYNC);
  EXPECT_EQ(WhyNoSharedMemory(sync), "");
}

TEST(SharedMemoryRuleTest, EachJobThatMayNotSaysWhy) {
  ParameterSpec replicated = AsyncSpec();
  replicated.set_replicas(2);
  EXPECT_NE(WhyNoSharedMemory(replicated).find("replicated"), std::string::npos);
  ParameterSpec sparse = AsyncSpec();
  sparse.add_sparse_tables()->set_name("embedding");
  EXPECT_NE(WhyNoSharedMemory(sparse).find("sparse tables"), std::string::npos);
  ParameterSpec float16 = AsyncSpec();
  float16.mutable_compression()->set_encoding(FLOAT16);
  EXPECT_NE(WhyNoSharedMemory(float16).find("compresses"), std::string::npos);
  ParameterSpec topk = AsyncSpec();
  topk.mutable_compression()->set_topk_fraction(0.1f);
  EXPECT_NE(WhyNoSharedMemory(topk).find("compresses"), std::string::npos);
  ParameterSpec ring = AsyncSpec();
  ring.mutable_consistency()->set_mode(ConsistencyConfig::ALLREDUCE);
  EXPECT_NE(WhyNoSharedMemory(ring).find("each other"), std::string::npos);
  EXPECT_NE(WhyNoSharedMemory(ParameterSpec()), "");  // No mode at all.
}

}  // namespace
}  // namespace ps
