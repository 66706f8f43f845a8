#include "common/net/grpc_status.h"

#include <gtest/gtest.h>

namespace ps {
namespace {

TEST(GrpcStatusTest, CodesAndMessagesRoundTrip) {
  for (absl::StatusCode code :
       {absl::StatusCode::kInvalidArgument, absl::StatusCode::kUnavailable,
        absl::StatusCode::kAborted, absl::StatusCode::kFailedPrecondition,
        absl::StatusCode::kDeadlineExceeded, absl::StatusCode::kNotFound,
        absl::StatusCode::kAlreadyExists, absl::StatusCode::kResourceExhausted}) {
    absl::Status status(code, "what went wrong");
    grpc::Status grpc_status = ToGrpcStatus(status);
    EXPECT_EQ(static_cast<int>(grpc_status.error_code()), static_cast<int>(code));
    EXPECT_EQ(grpc_status.error_message(), "what went wrong");
    EXPECT_EQ(FromGrpcStatus(grpc_status), status);
  }
  EXPECT_TRUE(ToGrpcStatus(absl::OkStatus()).ok());
  EXPECT_TRUE(FromGrpcStatus(grpc::Status::OK).ok());
}

TEST(GrpcStatusTest, APrimaryStreamsAgeTravelsWithTheRefusal) {
  const absl::Status refusal =
      WithPrimaryStreamAge(absl::UnavailableError("ps:0 still replicates"), absl::Seconds(3));
  const grpc::Status sent = ToGrpcStatus(refusal);
  EXPECT_EQ(sent.error_message(), "ps:0 still replicates");
  EXPECT_EQ(PrimaryStreamAge(sent), absl::Seconds(3));
  EXPECT_EQ(PrimaryStreamAge(ToGrpcStatus(FromGrpcStatus(sent))), absl::Seconds(3));
  EXPECT_EQ(PrimaryStreamAge(ToGrpcStatus(absl::UnavailableError("gone"))), std::nullopt);
  EXPECT_EQ(PrimaryStreamAge(grpc::Status(grpc::StatusCode::UNAVAILABLE, "x", "garbage")),
            std::nullopt);
}

TEST(GrpcStatusTest, WhereAShardMovedTravelsWithTheRefusal) {
  const grpc::Status sent =
      ToGrpcStatus(WithShardMovedTo(absl::UnavailableError("shard 1 moved to ps:2"), 2));
  EXPECT_EQ(ShardMovedTo(sent), 2);
  EXPECT_EQ(ShardMovedTo(ToGrpcStatus(FromGrpcStatus(sent))), 2);
  EXPECT_EQ(PrimaryStreamAge(sent), std::nullopt);
  EXPECT_EQ(ShardMovedTo(ToGrpcStatus(absl::UnavailableError("gone"))), std::nullopt);
  EXPECT_EQ(ShardMovedTo(grpc::Status(grpc::StatusCode::UNAVAILABLE, "x", "shard_moved_to_ps=x")),
            std::nullopt);
}

}  // namespace
}  // namespace ps
