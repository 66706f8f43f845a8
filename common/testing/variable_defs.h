// VariableDefs for tests, one line each.
#ifndef PS_COMMON_TESTING_VARIABLE_DEFS_H_
#define PS_COMMON_TESTING_VARIABLE_DEFS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "proto/parameter.pb.h"

namespace ps {
namespace testing_variables {

inline VariableDef MakeVariable(const std::string& name, const std::vector<int64_t>& shape,
                                InitializerConfig::Kind kind, float scale) {
  VariableDef variable;
  variable.set_name(name);
  for (int64_t dimension : shape) variable.add_shape(dimension);
  variable.mutable_initializer()->set_kind(kind);
  variable.mutable_initializer()->set_scale(scale);
  return variable;
}

}  // namespace testing_variables
}  // namespace ps

#endif  // PS_COMMON_TESTING_VARIABLE_DEFS_H_
