// psctl's flags (defined in psctl_flags.cc), for the commands' files: every command reads the
// ones its help lists (ctl/psctl_main.cc's command table).
#ifndef PS_CTL_PSCTL_FLAGS_H_
#define PS_CTL_PSCTL_FLAGS_H_

#include <gflags/gflags.h>

DECLARE_string(cluster_spec);
DECLARE_string(task);
DECLARE_string(to);
DECLARE_string(job);
DECLARE_string(results);
DECLARE_bool(overwrite);
DECLARE_string(checkpoint_dir);
DECLARE_bool(shared_checkpoint_dir);
DECLARE_string(checkpoint);
DECLARE_string(out);
DECLARE_int32(days);
DECLARE_string(users);
DECLARE_bool(resume);
DECLARE_bool(detach);
DECLARE_bool(trace);
DECLARE_int32(wait_for_cluster_s);
DECLARE_bool(replace);
DECLARE_int32(ps);
DECLARE_int32(workers);
DECLARE_string(sweep);
DECLARE_bool(local);
DECLARE_int32(parallel);
DECLARE_string(report_script);
DECLARE_string(python);
DECLARE_string(device);
DECLARE_string(ps_server_binary);
DECLARE_string(ps_worker_binary);
DECLARE_string(bind_host);
DECLARE_int32(port);
DECLARE_string(port_file);
DECLARE_int32(metrics_port);
DECLARE_int32(worker_metrics_port);
DECLARE_bool(keep_cluster);
DECLARE_int32(restarts);
DECLARE_string(scrape_interval);
DECLARE_int32(iterations);

#endif  // PS_CTL_PSCTL_FLAGS_H_
