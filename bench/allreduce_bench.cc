// allreduce_bench: bus bandwidth of the ring all-reduce between processes over loopback gRPC
// (worker/allreduce: RingAllReduceMean over GrpcRingLink, each process serving the Ring
// service as a ps_worker does), against OpenMPI's MPI_Allreduce on the same sizes, in the same
// run. bench/allreduce_bench.sh builds both sides and runs it.
//
//   allreduce_bench --processes=2,4 --sizes_mib=1,16,64 --rounds=7
//       --mpi_binary=/tmp/mpi_allreduce_bench --mpi_transports=default,tcp
//
// For each number of processes and each size, the sides take turns (the ring first for even
// size indexes, MPI first for odd ones, so that neither always runs on a machine warmed or
// loaded by the other). Each side starts its processes, warms up with one call, then times
// --rounds rounds of calls (--round_mib of data a round, at least one call); a round's time
// is the slowest process's seconds per call. The table shows each side's median and the ratio
// of the medians' bus bandwidths: 2 (N-1)/N x bytes / seconds (NCCL's definition), GB = 1e9 B;
// and the ring's CPU seconds per call, all its processes together (user and system; MPI's
// would mostly measure its busy polling). Each ring round also checks that every call sent
// exactly the bytes of the formula (RingAllReduceTraffic).
//
// A member process (--member=RANK) is what the launcher starts for the ring side.
#include <sys/resource.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <gflags/gflags.h>
#include <glog/logging.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/process/daemon.h"
#include "common/process/subprocess.h"
#include "tests/ring_member.h"
#include "worker/allreduce/ring_allreduce.h"

DEFINE_string(processes, "2,4", "numbers of processes, comma-separated");
DEFINE_string(sizes_mib, "1,16,64", "all-reduce sizes in MiB of float32, comma-separated");
DEFINE_int32(rounds, 7, "timed rounds per side and size (the medians are reported)");
DEFINE_int32(round_mib, 64, "data all-reduced per round, in MiB: calls a round = this / size");
DEFINE_int64(piece_kib, 1024, "RingOptions.piece_bytes, in KiB");
DEFINE_int32(sends_in_flight, 2, "RingOptions.sends_in_flight");
DEFINE_string(mpi_binary, "", "bench/mpi_allreduce_bench built with mpicxx; empty: ring only");
DEFINE_string(mpirun, "/usr/bin/mpirun", "OpenMPI's launcher (a path)");
DEFINE_string(mpi_transports, "default,tcp",
              "MPI runs per size: default (what OpenMPI picks: shared memory on one host), "
              "tcp (--mca pml ob1 --mca btl self,tcp: loopback TCP, like the ring's gRPC)");
DEFINE_string(work_dir, "/tmp", "where the processes' output files go");
// A member process.
DEFINE_int32(member, -1, "internal: run as ring member RANK");
DEFINE_string(ports, "", "internal: every member's port, comma-separated");
DEFINE_int64(size_bytes, 0, "internal: all-reduce size");
DEFINE_int32(iterations, 1, "internal: calls a round");

namespace ps {
namespace {

std::vector<int> ParseInts(const std::string& list) {
  std::vector<int> values;
  for (absl::string_view item : absl::StrSplit(list, ',', absl::SkipEmpty())) {
    int value = 0;
    CHECK(absl::SimpleAtoi(item, &value)) << "not a number: " << item;
    values.push_back(value);
  }
  return values;
}

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

// This process's CPU time (user and system) so far.
double CpuSeconds() {
  struct rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  auto seconds = [](const timeval& t) { return t.tv_sec + t.tv_usec / 1e6; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

// One ring member: serves the Ring service on its port, all-reduces with the others, and (rank
// 0) prints each round's slowest seconds per call and the bytes each call sent.
int RunMember() {
  TuneForTensorTraffic();  // As ps_worker does.
  const std::vector<int> ports = ParseInts(FLAGS_ports);
  const int rank = FLAGS_member;
  absl::StatusOr<std::unique_ptr<GrpcRingMember>> member =
      GrpcRingMember::Start(ports, rank, absl::Minutes(5));
  CHECK(member.ok()) << "member " << rank << ": " << member.status();
  RingLink* link = (*member)->link();

  RingOptions options;
  options.piece_bytes = FLAGS_piece_kib << 10;
  options.sends_in_flight = FLAGS_sends_in_flight;
  std::vector<float> data(FLAGS_size_bytes / sizeof(float), static_cast<float>(rank));
  uint64_t step = 0;
  auto all_reduce = [&](absl::Span<float> values) {
    absl::Status status = RingAllReduceMean(link, step++, values, options);
    CHECK(status.ok()) << "member " << rank << ": " << status;
  };
  all_reduce(absl::MakeSpan(data));  // Warm-up: connections, buffers, first touch.
  const int n = static_cast<int>(ports.size());
  for (int round = 0; round < FLAGS_rounds; ++round) {
    const int64_t sent_before = link->bytes_sent();
    const double cpu_before = CpuSeconds();
    const absl::Time start = absl::Now();
    for (int i = 0; i < FLAGS_iterations; ++i) all_reduce(absl::MakeSpan(data));
    const double seconds = absl::ToDoubleSeconds(absl::Now() - start) / FLAGS_iterations;
    const double cpu = (CpuSeconds() - cpu_before) / FLAGS_iterations;
    const int64_t sent = (link->bytes_sent() - sent_before) / FLAGS_iterations;
    // Every member's times, through the ring: the mean of vectors holding one member's each.
    std::vector<float> times(2 * n, 0.0f);
    times[rank] = static_cast<float>(seconds);
    times[n + rank] = static_cast<float>(cpu);
    all_reduce(absl::MakeSpan(times));
    const double slowest = n * *std::max_element(times.begin(), times.begin() + n);
    double total_cpu = 0;
    for (int i = n; i < 2 * n; ++i) total_cpu += n * times[i];
    if (rank == 0) {
      std::printf("round %d seconds %.9f cpu_seconds %.9f bytes_sent %lld expected %lld\n", round,
                  slowest, total_cpu, static_cast<long long>(sent),
                  static_cast<long long>(RingAllReduceTraffic(data.size(), n, 0).bytes_sent));
      std::fflush(stdout);
    }
  }
  return 0;
}

// What rank 0 (or mpirun) printed of each round: "round R seconds S", then for the ring
// "cpu_seconds C bytes_sent B expected E".
struct Rounds {
  std::vector<double> seconds;
  std::vector<double> cpu_seconds;  // The ring's only.
};

absl::StatusOr<Rounds> ParseRounds(const std::string& output) {
  Rounds rounds;
  for (absl::string_view line : absl::StrSplit(output, '\n')) {
    std::vector<absl::string_view> words = absl::StrSplit(line, ' ');
    double seconds = 0, cpu = 0;
    if (words.size() < 4 || words[0] != "round" || words[2] != "seconds" ||
        !absl::SimpleAtod(words[3], &seconds)) {
      continue;
    }
    rounds.seconds.push_back(seconds);
    if (words.size() == 10 && absl::SimpleAtod(words[5], &cpu)) {
      rounds.cpu_seconds.push_back(cpu);
      if (words[7] != words[9]) {
        return absl::InternalError(absl::StrCat("bytes sent differ from the formula: ", line));
      }
    }
  }
  if (static_cast<int>(rounds.seconds.size()) != FLAGS_rounds) {
    return absl::InternalError(absl::StrCat("expected ", FLAGS_rounds, " rounds, read ",
                                            rounds.seconds.size(), " from:\n", output));
  }
  return rounds;
}

// Runs the processes of one side to the end; returns rank 0's output (the first's).
absl::StatusOr<std::string> RunSide(const std::vector<std::vector<std::string>>& commands,
                                    const std::string& name) {
  std::vector<Subprocess> processes;
  for (size_t i = 0; i < commands.size(); ++i) {
    absl::StatusOr<Subprocess> started = Subprocess::Start(
        commands[i], absl::StrCat(FLAGS_work_dir, "/allreduce_bench-", name, "-", i, ".log"));
    if (!started.ok()) return started.status();
    processes.push_back(*std::move(started));
  }
  for (size_t i = 0; i < processes.size(); ++i) {
    std::optional<int> code = processes[i].Wait(absl::Minutes(10));
    if (code != 0) {
      return absl::InternalError(absl::StrCat(name, " process ", i, " ended with ",
                                              code ? absl::StrCat(*code) : "a timeout", ":\n",
                                              processes[i].Output()));
    }
  }
  return processes[0].Output();
}

absl::StatusOr<Rounds> RingSide(int n, int64_t bytes, int iterations) {
  absl::StatusOr<std::vector<int>> ports = PickUnusedPorts(n);
  if (!ports.ok()) return ports.status();
  std::vector<std::vector<std::string>> commands;
  for (int rank = 0; rank < n; ++rank) {
    commands.push_back(
        {"/proc/self/exe", absl::StrCat("--member=", rank),
         absl::StrCat("--ports=", absl::StrJoin(*ports, ",")), absl::StrCat("--size_bytes=", bytes),
         absl::StrCat("--iterations=", iterations), absl::StrCat("--rounds=", FLAGS_rounds),
         absl::StrCat("--piece_kib=", FLAGS_piece_kib),
         absl::StrCat("--sends_in_flight=", FLAGS_sends_in_flight)});
  }
  absl::StatusOr<std::string> output = RunSide(commands, "ring");
  if (!output.ok()) return output.status();
  return ParseRounds(*output);
}

absl::StatusOr<Rounds> MpiSide(const std::string& transport, int n, int64_t bytes, int iterations) {
  std::vector<std::string> command = {FLAGS_mpirun, "--allow-run-as-root", "--oversubscribe", "-np",
                                      absl::StrCat(n)};
  if (transport == "tcp") {
    for (const char* word : {"--mca", "pml", "ob1", "--mca", "btl", "self,tcp"}) {
      command.push_back(word);
    }
  } else if (transport != "default") {
    return absl::InvalidArgumentError(
        absl::StrCat("--mpi_transports: unknown transport \"", transport, "\" (default, tcp)"));
  }
  for (const std::string& word : {FLAGS_mpi_binary, absl::StrCat(bytes), absl::StrCat(FLAGS_rounds),
                                  absl::StrCat(iterations)}) {
    command.push_back(word);
  }
  absl::StatusOr<std::string> output = RunSide({command}, "mpi-" + transport);
  if (!output.ok()) return output.status();
  return ParseRounds(*output);
}

double BusGBps(int n, int64_t bytes, double seconds) {
  return 2.0 * (n - 1) / n * bytes / seconds / 1e9;
}

int RunLauncher() {
  std::vector<std::string> transports;
  if (!FLAGS_mpi_binary.empty()) {
    transports = absl::StrSplit(FLAGS_mpi_transports, ',', absl::SkipEmpty());
  }
  std::printf("| processes | MiB | calls/round | ring s (median) | ring bus GB/s | ring CPU s |");
  for (const std::string& transport : transports) {
    std::printf(" MPI %s s | MPI %s bus GB/s | ring/MPI %s |", transport.c_str(), transport.c_str(),
                transport.c_str());
  }
  std::string rule = "|---|---|---|---|---|---|";
  for (size_t i = 0; i < 3 * transports.size(); ++i) rule += "---|";
  std::printf("\n%s\n", rule.c_str());
  for (int n : ParseInts(FLAGS_processes)) {
    const std::vector<int> sizes = ParseInts(FLAGS_sizes_mib);
    for (size_t index = 0; index < sizes.size(); ++index) {
      const int64_t bytes = int64_t{sizes[index]} << 20;
      const int iterations = std::max(1, FLAGS_round_mib / sizes[index]);
      // Sides in turn: the ring first on even indexes, MPI first on odd ones.
      std::vector<std::string> order = {"ring"};
      for (const std::string& transport : transports) order.push_back(transport);
      if (index % 2 == 1) std::reverse(order.begin(), order.end());
      std::map<std::string, double> median;
      double ring_cpu = 0;
      for (const std::string& side : order) {
        absl::StatusOr<Rounds> rounds =
            side == "ring" ? RingSide(n, bytes, iterations) : MpiSide(side, n, bytes, iterations);
        CHECK(rounds.ok()) << side << ", " << n << " processes, " << sizes[index]
                           << " MiB: " << rounds.status();
        median[side] = Median(rounds->seconds);
        if (side == "ring") ring_cpu = Median(rounds->cpu_seconds);
        std::fprintf(stderr, "%s, %d processes, %d MiB: rounds %s s\n", side.c_str(), n,
                     sizes[index], absl::StrJoin(rounds->seconds, " ").c_str());
      }
      std::printf("| %d | %d | %d | %.4f | %.2f | %.4f |", n, sizes[index], iterations,
                  median["ring"], BusGBps(n, bytes, median["ring"]), ring_cpu);
      for (const std::string& transport : transports) {
        std::printf(" %.4f | %.2f | %.2f |", median[transport],
                    BusGBps(n, bytes, median[transport]), median[transport] / median["ring"]);
      }
      std::printf("\n");
      std::fflush(stdout);
    }
  }
  return 0;
}

}  // namespace
}  // namespace ps

int main(int argc, char** argv) {
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  FLAGS_logtostderr = true;
  google::InitGoogleLogging(argv[0]);
  return FLAGS_member >= 0 ? ps::RunMember() : ps::RunLauncher();
}
