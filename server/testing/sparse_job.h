// A small job with a sparse table, for the tests and benchmarks of sparse rows: a dense bias
// "b" of one float and a table "emb" of rows of `width`, plain SGD, run id "run".
#ifndef PS_SERVER_TESTING_SPARSE_JOB_H_
#define PS_SERVER_TESTING_SPARSE_JOB_H_

#include <cstdint>
#include <string>

#include "proto/parameter.pb.h"

namespace ps {

struct SparseJob {
  std::string job_id = "sparse";
  ConsistencyConfig::Mode mode = ConsistencyConfig::ASYNC;
  int num_workers = 1;
  int64_t width = 2;
  InitializerConfig::Kind initializer = InitializerConfig::UNIFORM;
  float initializer_scale = 0.5f;
  float learning_rate = 0.5f;
  uint64_t seed = 0;
};

inline ParameterSpec SparseJobSpec(const SparseJob& job) {
  ParameterSpec spec;
  spec.set_job_id(job.job_id);
  spec.set_run_id("run");
  VariableDef* bias = spec.add_variables();
  bias->set_name("b");
  bias->add_shape(1);
  SparseTableDef* table = spec.add_sparse_tables();
  table->set_name("emb");
  table->set_width(job.width);
  table->mutable_initializer()->set_kind(job.initializer);
  table->mutable_initializer()->set_scale(job.initializer_scale);
  spec.mutable_optimizer()->set_kind(OptimizerConfig::SGD);
  spec.mutable_learning_rate()->set_base(job.learning_rate);
  spec.mutable_consistency()->set_mode(job.mode);
  spec.set_num_workers(job.num_workers);
  spec.set_seed(job.seed);
  return spec;
}

}  // namespace ps

#endif  // PS_SERVER_TESTING_SPARSE_JOB_H_
