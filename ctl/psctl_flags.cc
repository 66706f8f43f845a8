// psctl's flags: each says which commands read it.
#include "ctl/psctl_flags.h"

#include <gflags/gflags.h>

DEFINE_string(cluster_spec, "", "ClusterSpec JSON file; TF_CONFIG is used when empty");
DEFINE_string(task, "",
              "check: a task to check against the cluster, as TYPE:INDEX (ps:0); remove-worker, "
              "add-worker: the worker (worker:2); move-shard: the shard's ps (ps:1)");
DEFINE_string(to, "", "move-shard: the ps the shard moves to (ps:2)");
DEFINE_string(job, "", "local, submit: the job file (local: config/jobs/default.json when "
                       "empty); status, stop, export, remove-worker, add-worker, move-shard: "
                       "the job id");
DEFINE_string(results, "", "where results go (default results/<job id>; experiment: "
                           "results/<sweep name>)");
DEFINE_bool(overwrite, false, "replace a results directory that is not empty (experiment: run "
                              "every point again)");
DEFINE_string(checkpoint_dir, "checkpoints",
              "local: where the ps daemons write checkpoints (ps:i in DIR/ps-i); give the same "
              "one to --resume a job on a fresh local cluster. export: the directories (comma-"
              "separated) holding the shards' checkpoint files");
DEFINE_bool(shared_checkpoint_dir, false,
            "local: every ps writes its checkpoints to --checkpoint_dir itself, as on a file "
            "system every host mounts, instead of DIR/ps-i; then a job resumes on another number "
            "of ps (--ps) than its checkpoint was taken on");
DEFINE_string(checkpoint, "", "export: the checkpoint's name (default: the newest complete one)");
DEFINE_string(out, "", "export: the directory to write the model to; certs: for the "
                       "certificates; prometheus-config: the file to write (default: stdout)");
DEFINE_int32(days, 365, "certs: how long the certificates are valid");
DEFINE_string(users, "", "certs: more users (comma-separated), each with a certificate of its own");
DEFINE_bool(resume, false,
            "submit: continue the job from its latest complete checkpoint as a new run (the "
            "same job file; a damaged checkpoint falls back to the one before)");
DEFINE_bool(detach, false, "submit: start the job and print its id without following it");
DEFINE_bool(trace, false,
            "local, submit: record the job's timeline (JobSpec.trace) and write it to "
            "RESULTS/trace.json, a Chrome trace (open it in Perfetto or chrome://tracing)");
DEFINE_int32(wait_for_cluster_s, 0,
             "submit: wait up to this many seconds for a cluster that is not ready (daemons "
             "still starting), probing it every second, before refusing the job (exit 138)");
DEFINE_bool(replace, false, "submit: when the cluster already holds the job id (an earlier run), "
                            "stop that run and delete its state everywhere, then start afresh");
DEFINE_int32(ps, 2, "local: ps tasks to start");
DEFINE_int32(workers, 2, "local: worker tasks to start (experiment --local: where the sweep "
                         "does not set \"workers\")");
DEFINE_string(sweep, "", "experiment: the sweep file (config/sweeps/*.json)");
DEFINE_bool(local, false, "experiment: run each point on a local cluster started for it");
DEFINE_int32(parallel, 1,
             "experiment: points run at once: jobs side by side on the cluster's daemons, or "
             "local clusters at once with --local");
DEFINE_string(report_script, "", "report: tools/report.py (default: found beside psctl or "
                                 "under the current directory)");
DEFINE_string(python, "/usr/bin/python3", "report: the python with matplotlib");
DEFINE_string(device, "auto", "local: each worker's --device");
DEFINE_string(ps_server_binary, "", "local: the ps_server program (default: beside psctl)");
DEFINE_string(ps_worker_binary, "", "local: the ps_worker program (default: beside psctl)");
DEFINE_string(bind_host, "127.0.0.1", "dashboard: the interface to serve the page on (plain "
                                      "HTTP: a trusted one)");
DEFINE_int32(port, 0, "dashboard: the page's HTTP port (0: any free one, see --port_file)");
DEFINE_string(port_file, "", "dashboard: if set, write the bound port here once listening");
DEFINE_int32(metrics_port, -1,
             "local: 0 starts every daemon with /metrics on a free port of its own (-1: none). "
             "prometheus-config: the /metrics port of every task (-1: ask each task for its own)");
DEFINE_int32(worker_metrics_port, -1,
             "prometheus-config: the workers' /metrics port where it is not --metrics_port's");
DEFINE_int32(restarts, 3,
             "local: how many times each daemon that dies is started again on its address "
             "(a ps's job then recovers, a worker rejoins); 0: never");
DEFINE_bool(keep_cluster, false,
            "local: after the job, keep the cluster running (for psctl submit, status and "
            "prometheus-config on DIR.cluster/cluster.json) until Ctrl-C or SIGTERM");
DEFINE_string(scrape_interval, "5s", "prometheus-config: how often Prometheus scrapes each task");
DEFINE_int32(iterations, 0, "top: screens to draw, one a second, before exiting (0: until q or "
                            "Ctrl-C)");
