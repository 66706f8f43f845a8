#include "worker/host_variables.h"

#include <algorithm>
#include <cstdint>

namespace ps {

HostVariables::HostVariables(const std::vector<VariableDef>& variables) {
  storage_.reserve(variables.size());  // The views point into the arrays: no reallocation.
  for (const VariableDef& variable : variables) {
    int64_t count = 1;
    for (int64_t dimension : variable.shape()) count *= dimension;
    storage_.emplace_back(count, 0.0f);
    mutable_[variable.name()] = absl::MakeSpan(storage_.back());
    const_[variable.name()] = absl::MakeConstSpan(storage_.back());
  }
}

void HostVariables::SetToZero() {
  for (std::vector<float>& array : storage_) std::fill(array.begin(), array.end(), 0.0f);
}

}  // namespace ps
