// The stability sweep of docs/EXPERIMENTS.md section 7: for each delay 0..--max_delay, the
// largest stable lr h measured on a DELAYED shard (tests/delay_stability.h) against the
// formula, as CSV on stdout: delay,measured,formula,ratio.
#include <cstdio>

#include <gflags/gflags.h>

#include "tests/delay_stability.h"

DEFINE_int32(max_delay, 10, "the largest delay swept");
DEFINE_double(tolerance, 0.001, "the bisection's relative bracket");
DEFINE_int64(steps, 40000, "updates per run");

int main(int argc, char** argv) {
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  std::printf("delay,measured,formula,ratio\n");
  for (int delay = 0; delay <= FLAGS_max_delay; ++delay) {
    absl::StatusOr<double> edge = ps::MeasuredStabilityEdge(delay, FLAGS_tolerance, FLAGS_steps);
    if (!edge.ok()) {
      std::fprintf(stderr, "delay %d: %s\n", delay, std::string(edge.status().message()).c_str());
      return 1;
    }
    const double formula = ps::TheoreticalStabilityEdge(delay);
    std::printf("%d,%.5f,%.5f,%.4f\n", delay, *edge, formula, *edge / formula);
    std::fflush(stdout);
  }
  return 0;
}
