// The check every model makes of the variables it is given (model.cc, sparse_model.cc).
#ifndef PS_WORKER_MODEL_CHECK_VARIABLE_H_
#define PS_WORKER_MODEL_CHECK_VARIABLE_H_

#include <cstddef>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace ps {
namespace model_internal {

// OK when `variables` (the caller's `what`: "weights", "gradients") holds `name` with exactly
// `count` elements; else INVALID_ARGUMENT saying which.
template <typename SpanT>
absl::Status CheckVariable(const absl::flat_hash_map<std::string, SpanT>& variables,
                           absl::string_view what, const std::string& name, size_t count) {
  auto it = variables.find(name);
  if (it == variables.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " are missing variable \"", name, "\" of ", count, " elements"));
  }
  if (it->second.size() != count) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " variable \"", name, "\" has ", it->second.size(), " elements; expected ", count));
  }
  return absl::OkStatus();
}

}  // namespace model_internal
}  // namespace ps

#endif  // PS_WORKER_MODEL_CHECK_VARIABLE_H_
