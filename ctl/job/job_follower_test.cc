// psctl's progress line: the chief's step, loss and rate, and its evaluations: the validation
// split's where the job has one, the test split's where the chief evaluated it.
#include "ctl/job/job_follower.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

namespace ps {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

JobProgress Chief(int64_t step) {
  JobProgress chief;
  chief.set_worker(0);
  chief.set_step(step);
  chief.set_loss(0.5);
  chief.set_elapsed_seconds(2);
  return chief;
}

TEST(ProgressLineTest, ShowsTheValidationSplitAndTheFinalTestEvaluation) {
  JobSpec spec;
  spec.set_steps(100);
  JobProgress chief = Chief(40);
  EXPECT_THAT(ProgressLine(spec, {chief}), HasSubstr("step 40/100 | loss 0.5000"));
  EXPECT_THAT(ProgressLine(spec, {chief}), Not(HasSubstr("acc")));

  chief.mutable_eval()->set_loss(0.25);
  chief.mutable_eval()->set_accuracy(0.875);
  EXPECT_THAT(ProgressLine(spec, {chief}), HasSubstr(" | eval loss 0.2500 acc 0.875"));

  // A job with a validation split: its evaluations, and the test split's once it has one.
  JobProgress validated = Chief(40);
  validated.mutable_validation()->set_loss(0.3);
  validated.mutable_validation()->set_accuracy(0.8);
  EXPECT_THAT(ProgressLine(spec, {validated}), HasSubstr(" | validation loss 0.3000 acc 0.800"));
  EXPECT_THAT(ProgressLine(spec, {validated}), Not(HasSubstr("eval loss")));
  *validated.mutable_eval() = chief.eval();
  EXPECT_THAT(ProgressLine(spec, {validated}),
              HasSubstr(" | validation loss 0.3000 acc 0.800 | eval loss 0.2500 acc 0.875"));
}

}  // namespace
}  // namespace ps
