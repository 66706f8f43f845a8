// Fuzzes reading a shard checkpoint file back (what a ps does on RestoreJob): the file's
// framing and checksums (common/checkpoint/checkpoint_file.h), then the blocks as ShardJob::Restore
// and ShardJob::Resume read them. Any bytes are a job or an error; a restored job answers a pull
// with every one of its slices.
//
// Input: a byte that picks the run's mode for Resume, a byte that picks the form, then either
// the file's bytes (odd form byte) or its blocks (even), each a tag byte and a framed payload
// (FuzzReader::Message), which the target writes as a file with valid checksums: most mutations
// of a whole file only break its checksums, so this form is what reaches the blocks' contents.
#include <memory>
#include <string>
#include <vector>

#include <glog/logging.h>

#include "common/checkpoint/checkpoint_file.h"
#include "common/checkpoint/shard_checkpoint.h"
#include "common/testing/fuzz_target.h"
#include "server/shard_job.h"
#include "server/shard_job_testing.h"

namespace ps {
namespace {

// A pull of every slice of the job answers with all of them.
void CheckServes(ShardJob* job) {
  const std::vector<float> values = AllValues(job);
  CHECK_EQ(static_cast<int64_t>(values.size()), job->num_parameters());
}

}  // namespace

std::vector<std::string> FuzzSeeds() {
  std::vector<std::string> seeds;
  // Every mode, and every mode again with a sparse table (its rows and open rows in blocks).
  for (uint8_t seed = 0; seed < 8; ++seed) {
    const uint8_t mode = seed % 4;
    const bool sparse = seed >= 4;
    ParameterSpec spec = CheckpointTestSpec(kEveryMode[mode], OptimizerConfig::ADAM);
    if (sparse) {
      SparseTableDef* table = spec.add_sparse_tables();
      table->set_name("emb");
      table->set_width(2);
    }
    absl::StatusOr<std::unique_ptr<ShardJob>> job = ShardJob::Create(spec, 1, 0);
    CHECK(job.ok()) << job.status();
    // Two steps of pushes and one worker's push of a third, so that slots, clocks, push ids and
    // (SYNC, SOFTSYNC) an open aggregate hold something.
    for (int64_t step = 0; step < 3; ++step) {
      for (int worker = 0; worker < (step < 2 ? kCheckpointTestWorkers : 1); ++worker) {
        PushRequestHeader header = StepPushHeader(**job, worker, step);
        std::vector<float> gradient((*job)->num_parameters(), 0.5f);
        if (sparse) {
          SparseRows* rows = header.add_sparse();
          rows->set_table("emb");
          rows->add_keys(static_cast<uint64_t>(worker + step));
          rows->add_keys(uint64_t{1} << 39);
          gradient.insert(gradient.end(), {0.25f, -0.25f, 1.0f, 2.0f});
        }
        (void)(*job)->Push(header, gradient);
      }
    }
    const std::vector<CheckpointBlock> blocks = (*job)->Checkpoint();
    const std::string prefix = {static_cast<char>(mode), 1};
    seeds.push_back(prefix + EncodeCheckpointFile(blocks));
    std::string framed = {static_cast<char>(mode), 0};
    for (const CheckpointBlock& block : blocks) {
      const absl::string_view payload = block.payload.empty() ? block.external : block.payload;
      framed += std::string(1, static_cast<char>(block.tag)) + FrameMessage(payload);
    }
    seeds.push_back(framed);
  }
  return seeds;
}

}  // namespace ps

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ps::FuzzReader in(data, size);
  const ps::ConsistencyConfig::Mode mode = ps::kEveryMode[in.Byte() % 4];
  std::string file;
  if (in.Byte() % 2 == 1) {
    file = std::string(in.Rest());
  } else {
    std::vector<ps::CheckpointBlock> framed;
    while (!in.empty()) {
      const uint8_t tag = in.Byte();
      framed.emplace_back(tag, std::string(in.Message()));
    }
    file = ps::EncodeCheckpointFile(framed);
  }
  absl::StatusOr<std::vector<ps::CheckpointBlock>> blocks = ps::DecodeCheckpointFile(file, "fuzz");
  if (!blocks.ok()) return 0;
  (void)ps::ReadShardCheckpointState(*blocks);
  absl::StatusOr<std::unique_ptr<ps::ShardJob>> restored =
      ps::ShardJob::Restore(*blocks, /*num_ps=*/1, /*ps_index=*/0);
  if (restored.ok()) ps::CheckServes(restored->get());
  // A new run of the job from the file, as RestoreJob with a resume point makes one.
  ps::ParameterSpec spec = ps::CheckpointTestSpec(mode, ps::OptimizerConfig::ADAM);
  spec.set_run_id("run-2");
  ps::ShardJob::ResumePoint at;
  at.checkpoint = "fuzz";
  at.step = 1;
  absl::StatusOr<std::unique_ptr<ps::ShardJob>> resumed =
      ps::ShardJob::Resume(*blocks, spec, /*num_ps=*/1, /*ps_index=*/0, at);
  if (resumed.ok()) ps::CheckServes(resumed->get());
  return 0;
}
