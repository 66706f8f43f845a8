#include "worker/host_variables.h"

#include <gtest/gtest.h>

namespace ps {
namespace {

VariableDef Variable(const std::string& name, std::vector<int64_t> shape) {
  VariableDef variable;
  variable.set_name(name);
  for (int64_t dimension : shape) variable.add_shape(dimension);
  return variable;
}

TEST(HostVariablesTest, HoldsAZeroedArrayPerVariableWithViewsByName) {
  HostVariables host({Variable("w", {3, 2}), Variable("b", {2})});
  ASSERT_EQ(host.arrays().size(), 2u);
  EXPECT_EQ(host.arrays()[0].size(), 6u);
  EXPECT_EQ(host.arrays()[1].size(), 2u);
  host.mutable_view().at("b")[1] = 5.0f;
  EXPECT_EQ(host.arrays()[1][1], 5.0f);
  EXPECT_EQ(host.const_view().at("b")[1], 5.0f);
  EXPECT_EQ(host.const_view().at("w").size(), 6u);
  EXPECT_EQ(host.const_view().at("w")[5], 0.0f);
}

TEST(HostVariablesTest, SetToZeroClearsEveryArray) {
  HostVariables host({Variable("w", {2, 2}), Variable("b", {2})});
  for (std::vector<float>& array : host.arrays()) array.assign(array.size(), 3.0f);
  host.SetToZero();
  for (const std::vector<float>& array : host.arrays()) {
    for (float value : array) EXPECT_EQ(value, 0.0f);
  }
}

}  // namespace
}  // namespace ps
