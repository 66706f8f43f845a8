// psctl top's screen: one ClusterSnapshot drawn as lines of text, which psctl top redraws each
// second. Per task: up or down (and why), pid, CPU %, resident memory, uptime. Per job: its
// state, mode, global step, examples/s (the workers' sum), loss (their mean), staleness mean
// and max; whom a SYNC barrier waits for and for how long, or how long pulls have waited at an
// SSP bound; and a row per worker. Pure: the same snapshots give the same text.
#ifndef PS_CTL_DASHBOARD_TOP_H_
#define PS_CTL_DASHBOARD_TOP_H_

#include <string>

#include "ctl/cluster/cluster_snapshot.h"

namespace ps {

// The screen for `now`: lines ending in '\n', each cut to `width` characters (no cut when
// width <= 0). `previous` is the snapshot drawn before it, or null: a task's CPU % is its CPU
// seconds between the two over the time between them, "-" without a previous sighting of the
// same process (task up in both, same pid).
std::string RenderTop(const ClusterSnapshot& now, const ClusterSnapshot* previous, int width);

}  // namespace ps

#endif  // PS_CTL_DASHBOARD_TOP_H_
