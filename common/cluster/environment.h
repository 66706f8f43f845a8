// Environment variables as a value. Code that reads the environment (TF_CONFIG, Slurm's
// variables) takes an Environment, so that tests pass their own instead of calling setenv.
#ifndef PS_COMMON_CLUSTER_ENVIRONMENT_H_
#define PS_COMMON_CLUSTER_ENVIRONMENT_H_

#include <functional>
#include <map>
#include <string>

#include "absl/strings/string_view.h"

namespace ps {

// Variable name -> value.
using Environment = std::map<std::string, std::string, std::less<>>;

// A copy of this process's environment, taken when called. Not thread-safe against setenv.
Environment ProcessEnvironment();

// The value of `name` in `environment`, or null when it is unset.
const std::string* FindVariable(const Environment& environment, absl::string_view name);

}  // namespace ps

#endif  // PS_COMMON_CLUSTER_ENVIRONMENT_H_
