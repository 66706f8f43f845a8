// Host copies of every variable of a model, in the maps the ps client and the model take.
#ifndef PS_WORKER_HOST_VARIABLES_H_
#define PS_WORKER_HOST_VARIABLES_H_

#include <vector>

#include "common/job/variables.h"
#include "proto/parameter.pb.h"

namespace ps {

// One zero-filled float array per variable, with views by name. The views point into the
// arrays, which never move: copying or moving a HostVariables is not allowed. Not thread-safe.
class HostVariables {
 public:
  explicit HostVariables(const std::vector<VariableDef>& variables);
  HostVariables(const HostVariables&) = delete;
  HostVariables& operator=(const HostVariables&) = delete;

  const MutableVariables& mutable_view() const { return mutable_; }
  const ConstVariables& const_view() const { return const_; }
  // The arrays, in the order of the variables given.
  std::vector<std::vector<float>>& arrays() { return storage_; }
  const std::vector<std::vector<float>>& arrays() const { return storage_; }
  void SetToZero();

 private:
  std::vector<std::vector<float>> storage_;
  MutableVariables mutable_;
  ConstVariables const_;
};

}  // namespace ps

#endif  // PS_WORKER_HOST_VARIABLES_H_
