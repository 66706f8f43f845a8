// Fuzzes what a ps does with the pull and push requests a peer sends: a sequence of Push
// (whole or chunked), PushPull and Pull requests, as bytes in gRPC's slices, to a small job of
// any consistency mode and optimizer. Covers the tensor decoder (common/tensor/tensor_coding.h),
// the chunk headers (ShardJob::PushChunkBuffer), the push and pull checks of ShardJob and its
// consistency rules. Whatever is sent, every pull that is answered holds one piece per slice
// it names, and encodes and decodes back to the same values.
//
// Input: a mode byte, an optimizer byte, then requests: a flags byte (bits 0-1: 0 or 1 Push, 2
// PushPull, 3 Pull; bits 2-7: where the bytes are cut into slices) and a framed message
// (FuzzReader::Message).
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include <glog/logging.h>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "common/net/proto_byte_buffer.h"
#include "common/tensor/tensor_coding.h"
#include "common/testing/fuzz_target.h"
#include "server/push_request.h"
#include "server/shard_job.h"
#include "server/shard_job_testing.h"

namespace ps {
namespace {

constexpr OptimizerConfig::Kind kOptimizers[] = {OptimizerConfig::SGD, OptimizerConfig::MOMENTUM,
                                                 OptimizerConfig::ADAGRAD, OptimizerConfig::ADAM};
enum RequestKind : uint8_t { kPush = 0, kPushPull = 2, kPull = 3 };

// An answered pull: one piece per slice, and the response round-trips through the coding.
void CheckPulled(absl::StatusOr<ShardJob::PullSnapshot> snapshot) {
  if (!snapshot.ok()) return;
  CHECK_EQ(static_cast<int>(snapshot->pieces.size()), snapshot->header.slices_size());
  std::vector<float> sent;
  for (absl::Span<const float> piece : snapshot->pieces) {
    sent.insert(sent.end(), piece.begin(), piece.end());
  }
  grpc::ByteBuffer encoded =
      EncodeTensorMessage(snapshot->header, snapshot->pieces, snapshot->keep_alive);
  std::vector<float> received(sent.size());
  PullResponseHeader header;
  absl::Status decoded = DecodeTensorMessage(
      encoded, &header,
      [&](const google::protobuf::MessageLite&) -> absl::StatusOr<std::vector<absl::Span<float>>> {
        return std::vector<absl::Span<float>>{absl::MakeSpan(received)};
      });
  CHECK(decoded.ok()) << decoded;
  CHECK(std::equal(sent.begin(), sent.end(), received.begin(), received.end(),
                   [](float a, float b) { return a == b || (a != a && b != b); }));
}

std::unique_ptr<ShardJob> MakeJob(uint8_t mode, uint8_t optimizer) {
  absl::StatusOr<std::unique_ptr<ShardJob>> job = ShardJob::Create(
      CheckpointTestSpec(kEveryMode[mode % 4], kOptimizers[optimizer % 4]), /*num_ps=*/1,
      /*ps_index=*/0);
  CHECK(job.ok()) << job.status();
  return *std::move(job);
}

std::string Request(RequestKind kind, const std::string& message) {
  return std::string(1, static_cast<char>(kind)) + FrameMessage(message);
}

std::string PullBytes(const ShardJob& job, int worker, int64_t step) {
  PullRequest pull;
  pull.set_job_id(job.spec().job_id());
  pull.set_run_id(job.spec().run_id());
  pull.set_worker(worker);
  pull.set_step(step);
  pull.set_clock(step);
  return pull.SerializeAsString();
}

// Worker `worker`'s push of step `step`, as one message or in `chunks` chunks.
std::vector<std::string> PushBytes(const ShardJob& job, int worker, int64_t step, int chunks) {
  PushRequestHeader header = StepPushHeader(job, worker, step);
  std::vector<float> gradient(job.num_parameters());
  for (size_t i = 0; i < gradient.size(); ++i) gradient[i] = 0.01f * static_cast<float>(i % 7);
  std::vector<std::string> messages;
  const int64_t per_chunk = (job.num_parameters() + chunks - 1) / chunks;
  for (int chunk = 0; chunk < chunks; ++chunk) {
    const int64_t offset = chunk * per_chunk;
    const int64_t size = std::min<int64_t>(per_chunk, job.num_parameters() - offset);
    if (chunks > 1) {
      header.set_total_chunks(chunks);
      header.set_chunk_offset(offset);
      header.set_chunk_size(size);
    }
    absl::Span<const float> piece = absl::MakeConstSpan(gradient).subspan(offset, size);
    messages.push_back(FlattenByteBuffer(
        EncodeTensorMessage(header, {piece}, std::make_shared<std::vector<float>>(gradient))));
  }
  return messages;
}

}  // namespace

std::vector<std::string> FuzzSeeds() {
  std::vector<std::string> seeds;
  for (uint8_t mode = 0; mode < 4; ++mode) {
    std::unique_ptr<ShardJob> job = MakeJob(mode, mode);
    std::string seed = {static_cast<char>(mode), static_cast<char>(mode)};
    for (int step = 0; step < 2; ++step) {
      for (int worker = 0; worker < kCheckpointTestWorkers; ++worker) {
        seed += Request(kPull, PullBytes(*job, worker, step));
        const int chunks = worker % 2 == 0 ? 1 : 3;
        for (const std::string& push : PushBytes(*job, worker, step, chunks)) {
          seed += Request(kPush, push);
        }
      }
    }
    seeds.push_back(seed);
  }
  return seeds;
}

}  // namespace ps

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ps::FuzzReader in(data, size);
  const uint8_t mode = in.Byte();
  std::shared_ptr<ps::ShardJob> job = ps::MakeJob(mode, in.Byte());
  const ps::JobLookup find_job =
      [&job](const ps::PushRequestHeader& header)
      -> absl::StatusOr<std::shared_ptr<ps::ShardJob>> {
    if (header.job_id() != job->spec().job_id()) return absl::NotFoundError("no such job");
    return job;
  };
  while (!in.empty()) {
    const uint8_t flags = in.Byte();
    const grpc::ByteBuffer request = ps::ToByteBuffer(in.Message(), flags >> 2);
    switch (flags & 3) {
      case ps::kPull: {
        ps::PullRequest pull;
        if (ps::ParseFromByteBuffer(request, &pull).ok()) job->Pull(pull, ps::CheckPulled);
        break;
      }
      case ps::kPushPull: {
        ps::PushRequestHeader header;
        if (ps::DecodeAndApplyPush(request, /*allow_chunks=*/false, find_job, &header).ok()) {
          ps::PullRequest pull = header.then_pull();
          pull.set_job_id(header.job_id());
          pull.set_worker(header.worker());
          pull.set_run_id(header.run_id());
          job->Pull(pull, ps::CheckPulled);
        }
        break;
      }
      default: {
        ps::PushRequestHeader header;
        (void)ps::DecodeAndApplyPush(request, /*allow_chunks=*/true, find_job, &header);
      }
    }
  }
  job->CancelAllWaiters(absl::CancelledError("the fuzz input ended"));
  return 0;
}
