// The time and bytes of one shard checkpoint of a model of --size_mb MiB, taken as the ps takes
// it (ShardJob::ArmCheckpoint at once: the optimizer slots copied, the values held by
// reference), then WriteCheckpointFile: the file encoded block by block, with a checksum per
// block, into an atomic file (temporary file, fsync, rename, fsync of the directory), against
// `dd ... conv=fsync` copying the same bytes (the checkpoint file, from the page cache) into the
// same directory in the same run. The two alternate, --repeats times each; medians are printed
// with every run.
//
//   bazel build -c opt //bench:checkpoint_bench
//   bazel-out/k8-opt/bin/bench/checkpoint_bench --size_mb=64,256 --dir=/var/tmp --repeats=3
#include <gflags/gflags.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/file_system.h"
#include "common/checkpoint/checkpoint_file.h"
#include "server/shard_job.h"

DEFINE_string(size_mb, "64,256", "model sizes in MiB, comma-separated");
DEFINE_string(dir, "/var/tmp", "where the checkpoint and dd's file are written (then removed)");
DEFINE_int32(repeats, 3, "runs of each side per size");

namespace ps {
namespace {

// One variable of `bytes` bytes (rows of 1024 floats), Adam (two slots, as a real job's
// checkpoint carries), on one ps.
ParameterSpec Model(int64_t bytes) {
  ParameterSpec spec;
  spec.set_job_id("checkpoint-bench");
  VariableDef* w = spec.add_variables();
  w->set_name("w");
  w->add_shape(bytes / 4 / 1024);
  w->add_shape(1024);
  w->mutable_initializer()->set_kind(InitializerConfig::UNIFORM);
  w->mutable_initializer()->set_scale(0.1f);
  spec.mutable_optimizer()->set_kind(OptimizerConfig::ADAM);
  spec.mutable_learning_rate()->set_base(0.01f);
  spec.mutable_consistency()->set_mode(ConsistencyConfig::ASYNC);
  spec.set_num_workers(1);
  return spec;
}

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

int Run() {
  FileSystem* fs = FileSystem::Default();
  std::printf("checkpoint_bench: one shard's checkpoint against dd conv=fsync, in %s; "
              "MB = 1e6 bytes\n",
              FLAGS_dir.c_str());
  std::printf("%8s %12s %10s %10s %12s %12s %8s\n", "model", "file MB", "snapshot s",
              "write s", "ckpt MB/s", "dd MB/s", "ratio");
  for (absl::string_view size : absl::StrSplit(FLAGS_size_mb, ',', absl::SkipWhitespace())) {
    int64_t mib = 0;
    if (!absl::SimpleAtoi(size, &mib) || mib < 1) {
      std::fprintf(stderr, "checkpoint_bench: bad --size_mb entry \"%s\"\n",
                   std::string(size).c_str());
      return 2;
    }
    absl::StatusOr<std::unique_ptr<ShardJob>> job = ShardJob::Create(Model(mib << 20), 1, 0);
    if (!job.ok()) {
      std::fprintf(stderr, "checkpoint_bench: %s\n", job.status().ToString().c_str());
      return 1;
    }
    const std::string path = absl::StrCat(FLAGS_dir, "/checkpoint_bench.ckpt");
    const std::string dd_path = absl::StrCat(FLAGS_dir, "/checkpoint_bench.dd");
    std::vector<double> snapshot_s, write_s, ckpt_rate, dd_rate;
    size_t file_bytes = 0;
    for (int r = 0; r < FLAGS_repeats; ++r) {
      absl::Time start = absl::Now();
      std::vector<CheckpointBlock> blocks;
      absl::Status armed = (*job)->ArmCheckpoint(
          "", r + 1, -1, [&blocks](ShardJob::TakenCheckpoint taken) {
            blocks = std::move(taken.blocks);
          });
      absl::Time snapshotted = absl::Now();
      if (!armed.ok()) {
        std::fprintf(stderr, "checkpoint_bench: %s\n", armed.ToString().c_str());
        return 1;
      }
      absl::Status written = WriteCheckpointFile(fs, path, blocks).status();  // Encoded as it goes.
      absl::Time done = absl::Now();
      if (!written.ok()) {
        std::fprintf(stderr, "checkpoint_bench: %s\n", written.ToString().c_str());
        return 1;
      }
      file_bytes = std::filesystem::file_size(path);
      snapshot_s.push_back(absl::ToDoubleSeconds(snapshotted - start));
      write_s.push_back(absl::ToDoubleSeconds(done - snapshotted));
      ckpt_rate.push_back(file_bytes / 1e6 / absl::ToDoubleSeconds(done - start));

      // The same bytes (the checkpoint just written, in the page cache): a disk may take
      // zeros faster than data.
      const std::string dd =
          absl::StrCat("dd if=", path, " of=", dd_path, " bs=1M conv=fsync status=none");
      absl::Time dd_start = absl::Now();
      if (std::system(dd.c_str()) != 0) {
        std::fprintf(stderr, "checkpoint_bench: %s failed\n", dd.c_str());
        return 1;
      }
      dd_rate.push_back(file_bytes / 1e6 / absl::ToDoubleSeconds(absl::Now() - dd_start));
    }
    std::remove(path.c_str());
    std::remove(dd_path.c_str());
    std::printf("%5lld MiB %12.1f %10.3f %10.3f %12.0f %12.0f %8.2f\n",
                static_cast<long long>(mib), file_bytes / 1e6, Median(snapshot_s),
                Median(write_s), Median(ckpt_rate), Median(dd_rate),
                Median(ckpt_rate) / Median(dd_rate));
    for (int r = 0; r < FLAGS_repeats; ++r) {
      std::printf("         run %d: checkpoint %.0f MB/s (snapshot %.3f s, encode and write "
                  "%.3f s), dd %.0f MB/s\n",
                  r + 1, ckpt_rate[r], snapshot_s[r], write_s[r], dd_rate[r]);
    }
  }
  return 0;
}

}  // namespace
}  // namespace ps

int main(int argc, char** argv) {
  gflags::SetUsageMessage("checkpoint_bench --size_mb=64,256 --dir=/var/tmp --repeats=3");
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  return ps::Run();
}
