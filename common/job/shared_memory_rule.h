// Which jobs' tensors may go through shared memory between a worker and a ps on one host
// (docs/shared_memory.md): one rule, asked by the worker before it opens a segment and by the ps
// before it opens one.
#ifndef PS_COMMON_JOB_SHARED_MEMORY_RULE_H_
#define PS_COMMON_JOB_SHARED_MEMORY_RULE_H_

#include <string>

#include "proto/parameter.pb.h"

namespace ps {

// Empty where the job's dense pushes and pulls may go through shared memory; else why not:
// a replicated job (its calls move to the shard's other copy, on another ps), sparse tables
// (their rows vary in number from call to call), compressed values, or a ring mode (the
// workers exchange with each other, not the shards).
std::string WhyNoSharedMemory(const ParameterSpec& spec);

}  // namespace ps

#endif  // PS_COMMON_JOB_SHARED_MEMORY_RULE_H_
