// psctl: the user's tool for a parameter-server cluster.
//
//   psctl local  [--job=config/jobs/default.json] [--ps=2] [--workers=2] [--results=DIR]
//                [--checkpoint_dir=checkpoints] [--resume] [--metrics_port=0] [--keep_cluster]
//   psctl submit --cluster_spec=FILE --job=FILE [--results=DIR] [--detach] [--replace|--resume]
//   psctl status --cluster_spec=FILE [--job=ID]
//   psctl stop   --cluster_spec=FILE --job=ID
//   psctl check  --cluster_spec=FILE [--task=ps:0]
//   psctl experiment --sweep=FILE (--local | --cluster_spec=FILE) [--results=DIR] [--parallel=K]
//   psctl export --checkpoint_dir=DIR[,DIR] --job=ID --out=DIR [--checkpoint=NAME]
//   psctl certs  --cluster_spec=FILE --out=DIR [--days=365]
//   psctl report SWEEP_DIR | RUN_DIR [RUN_DIR...]
//   psctl replay RESULTS_DIR [--results=DIR]
//   psctl slurm-spec --slurm_num_ps=N [--slurm_base_port=8888]
//   psctl dashboard --cluster_spec=FILE [--bind_host=127.0.0.1] [--port=0] [--port_file=FILE]
//   psctl top    --cluster_spec=FILE [--iterations=N]
//   psctl prometheus-config --cluster_spec=FILE [--out=FILE] [--scrape_interval=5s]
//                [--metrics_port=PORT [--worker_metrics_port=PORT]]
//
// Every command that takes --cluster_spec takes --cluster_resolver=slurm instead (with
// --slurm_num_ps and --slurm_base_port) inside a Slurm job: deploy/slurm/.
//
// The commands are in psctl_job_commands.cc and psctl_cluster_commands.cc (ctl/psctl_commands.h),
// their flags in psctl_flags.cc; this file holds the command table, the help and main.
//
// Exit status (ctl/job/exit_code.h): 0 on success; 1 when the job failed on its own; 2 for bad
// input or usage (an unknown flag too); 4 when someone else stopped the job; 130 when
// interrupted (the job is stopped everywhere); 138 when the cluster is not ready, out of reach
// or full (retry). dashboard runs until SIGINT or SIGTERM, then stops and exits 0; top likewise,
// or until q is pressed.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>
#include <thread>

#include <gflags/gflags.h>
#include <glog/logging.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/process/build_info.h"
#include "common/cluster/cluster_spec.h"
#include "common/process/daemon.h"
#include "common/did_you_mean.h"
#include "common/process/flag_help.h"
#include "common/security/security_flags.h"
#include "ctl/dashboard/dashboard.h"
#include "ctl/cluster/local_cluster.h"
#include "ctl/cluster/local_credentials.h"
#include "ctl/psctl_commands.h"
#include "ctl/psctl_flags.h"

namespace ps {
namespace {

// Every command: how it runs, and its help (psctl COMMAND --help).
struct Command {
  const char* name;
  int num_args;  // Words after the command (report's directories); -1: one or more.
  int (*run)(const std::vector<std::string>& args);
  const char* summary;  // One line for psctl --help.
  const char* usage;    // Its synopsis and examples.
  std::vector<std::string> flags;
};

// Running a job and looking after the cluster, in psctl --help's order.
std::vector<Command> JobAndClusterCommands() {
  return {
      {"local", 0, [](const std::vector<std::string>&) { return Local(); },
       "start a cluster on this machine, run a job on it, write results, stop it",
       "psctl local [--job=config/jobs/default.json] [--ps=2] [--workers=2] [flags]\n\n"
       "Examples:\n"
       "  psctl local\n"
       "  psctl local --job=config/jobs/mnist_sync.json --workers=4 --results=results/mnist\n"
       "  psctl local --metrics_port=0 --keep_cluster   # /metrics on every daemon; Ctrl-C ends\n"
       "  psctl local --trace   # RESULTS/trace.json: each step's pull, compute, push, apply",
       {"job", "ps", "workers", "results", "overwrite", "device", "checkpoint_dir",
        "shared_checkpoint_dir", "resume", "metrics_port", "keep_cluster", "restarts", "trace",
        "ps_server_binary", "ps_worker_binary"}},
      {"submit", 0, [](const std::vector<std::string>&) { return SubmitCommand(); },
       "run a job on a running cluster and follow it to its end",
       "psctl submit --cluster_spec=F --job=F [flags]\n\n"
       "Examples:\n"
       "  psctl submit --cluster_spec=cluster.json --job=config/jobs/default.json\n"
       "  psctl submit --cluster_spec=cluster.json --job=job.json --replace   # its id ran before\n"
       "  psctl submit --cluster_spec=cluster.json --job=job.json --resume    # from a checkpoint",
       {"cluster_spec", "job", "results", "overwrite", "replace", "resume", "detach",
        "wait_for_cluster_s", "trace"}},
      {"status", 0, [](const std::vector<std::string>&) { return Status(); },
       "every task up or down, its jobs, and one job's versions and staleness",
       "psctl status --cluster_spec=F [--job=ID]\n\n"
       "Examples:\n"
       "  psctl status --cluster_spec=cluster.json\n"
       "  psctl status --cluster_spec=cluster.json --job=default",
       {"cluster_spec", "job"}},
      {"stop", 0, [](const std::vector<std::string>&) { return Stop(); },
       "stop a job on every worker and delete it from every ps",
       "psctl stop --cluster_spec=F --job=ID\n\n"
       "Example:\n"
       "  psctl stop --cluster_spec=cluster.json --job=default",
       {"cluster_spec", "job"}},
      {"remove-worker", 0, [](const std::vector<std::string>&) { return RemoveWorker(); },
       "take a worker out of a running job, which goes on without it",
       "psctl remove-worker --cluster_spec=F --job=ID --task=worker:N\n\n"
       "The worker stops at the end of its step, gives its batches back and leaves every shard;\n"
       "SYNC's steps aggregate the others' gradients. Refused for the chief (worker:0), a ring mode,\n"
       "or when fewer than the job's min_workers (at least 1) would be left.\n\n"
       "Example:\n"
       "  psctl remove-worker --cluster_spec=cluster.json --job=default --task=worker:2",
       {"cluster_spec", "job", "task"}},
      {"add-worker", 0, [](const std::vector<std::string>&) { return AddWorker(); },
       "take a worker back into the running job, or grow the job by a new one",
       "psctl add-worker --cluster_spec=F --job=ID --task=worker:N\n\n"
       "The psctl following the job (the one that submitted it) starts it there again as the\n"
       "worker's next incarnation: SYNC at the shards' step. A worker whose daemon was down\n"
       "joins an elastic job on its own once its daemon is up.\n"
       "A worker the job never had: F is the job's ClusterSpec grown by workers listed after its\n"
       "own (the ps tasks the same); every shard takes the new workers, and the psctl following\n"
       "the job starts each once its ps_worker (started with F) is up. Only an elastic job\n"
       "(min_workers) with its data handed out (sharding DYNAMIC) grows.\n\n"
       "Examples:\n"
       "  psctl add-worker --cluster_spec=cluster.json --job=default --task=worker:2\n"
       "  psctl add-worker --cluster_spec=grown.json --job=default --task=worker:3",
       {"cluster_spec", "job", "task"}},
      {"move-shard", 0, [](const std::vector<std::string>&) { return MoveShard(); },
       "move a running job's shard to another ps, live",
       "psctl move-shard --cluster_spec=F --job=ID --task=ps:N --to=ps:M\n\n"
       "Shard N (held by ps:N) is copied to ps:M, the updates that came meanwhile follow it in\n"
       "order, and ps:M serves it from then on; the workers follow it with their next calls,\n"
       "with no step lost or done twice. Returns once ps:M serves it, or says why the shard\n"
       "stays where it was. A moved shard moves on from where it is, or home (--to=ps:N).\n"
       "Checkpoints pause while a shard is away from its own ps. Only a job without replicas\n"
       "moves (docs/replication.md, \"A live move to another ps\").\n\n"
       "Examples:\n"
       "  psctl move-shard --cluster_spec=cluster.json --job=default --task=ps:1 --to=ps:2\n"
       "  psctl move-shard --cluster_spec=cluster.json --job=default --task=ps:1 --to=ps:1",
       {"cluster_spec", "job", "task", "to"}},
      {"drain-ps", 0, [](const std::vector<std::string>&) { return DrainPs(); },
       "move every shard off a ps, live, so that it may be stopped",
       "psctl drain-ps --cluster_spec=F --task=ps:N [--to=ps:M]\n\n"
       "Every shard ps:N serves, of every job without replicas (its own shard of each job, and\n"
       "shards moved to it), moves as psctl move-shard moves one: a shard moved to ps:N goes\n"
       "home, the others to --to or else each to the ps serving the fewest shards. Then ps:N\n"
       "may be stopped, or lost, with no step of any job redone. A job with replicas keeps its\n"
       "copies on ps:N: psctl says which, exits with an error, and ps:N must stay. A user's\n"
       "psctl sees and moves that user's jobs only; an admin's, every job. Once ps:N is back\n"
       "(started again, empty or not), psctl undrain-ps --task=ps:N brings its shards home.\n\n"
       "Examples:\n"
       "  psctl drain-ps --cluster_spec=cluster.json --task=ps:2\n"
       "  psctl drain-ps --cluster_spec=cluster.json --task=ps:2 --to=ps:0",
       {"cluster_spec", "task", "to"}},
      {"undrain-ps", 0, [](const std::vector<std::string>&) { return UndrainPs(); },
       "bring a ps's shards home, live, once it is back",
       "psctl undrain-ps --cluster_spec=F --task=ps:N\n\n"
       "Every copy of ps:N's own shard that another ps serves (moved there by move-shard or\n"
       "drain-ps) moves home to ps:N, as psctl move-shard moves one, while the jobs train.\n"
       "ps:N may have been started again empty: it takes its shard of each job as its own, and\n"
       "the jobs' checkpoints resume. A user's psctl moves that user's jobs only.\n\n"
       "Example:\n"
       "  psctl undrain-ps --cluster_spec=cluster.json --task=ps:2",
       {"cluster_spec", "task"}},
      {"check", 0, [](const std::vector<std::string>&) { return Check(); },
       "validate a ClusterSpec (and a task of it)",
       "psctl check --cluster_spec=F [--task=ps:0]\n\n"
       "Examples:\n"
       "  psctl check --cluster_spec=cluster.json\n"
       "  psctl check --cluster_spec=cluster.json --task=worker:1",
       {"cluster_spec", "task"}},
      {"export", 0, [](const std::vector<std::string>&) { return Export(); },
       "a checkpoint's model as .npy files and model.safetensors",
       "psctl export --checkpoint_dir=DIR[,DIR] --job=ID --out=DIR [--checkpoint=NAME]\n\n"
       "Example:\n"
       "  psctl export --checkpoint_dir=/shared/ckpt --job=default --out=model/",
       {"checkpoint_dir", "job", "out", "checkpoint"}},
      {"certs", 0, [](const std::vector<std::string>&) { return Certs(); },
       "a CA and certificates for mutual TLS",
       "psctl certs --cluster_spec=F --out=DIR [--days=365] [--users=alice,bob]\n\n"
       "It also writes the cluster's tokens (cluster.token, admin.token). Every daemon and psctl\n"
       "then takes --certs=DIR for all of it (or --tls_cert, --tls_key, --tls_ca and the token\n"
       "files one by one); with a user's certificate only its owner may use a job.\n\n"
       "Example:\n"
       "  psctl certs --cluster_spec=cluster.json --out=certs --users=alice",
       {"cluster_spec", "out", "days", "users"}},
  };
}

// Experiments, their reports, and watching a cluster.
std::vector<Command> ExperimentAndWatchCommands() {
  return {
      {"experiment", 0, [](const std::vector<std::string>&) { return Experiment(); },
       "run every point of a sweep, resumably, and write the sweep table",
       "psctl experiment --sweep=config/sweeps/F.json (--local | --cluster_spec=F) [flags]\n\n"
       "Examples:\n"
       "  psctl experiment --sweep=config/sweeps/modes.json --local\n"
       "  psctl experiment --sweep=config/sweeps/async_lr.json --cluster_spec=cluster.json\n"
       "  psctl experiment --sweep=config/sweeps/modes.json --cluster_spec=cluster.json "
       "--parallel=4",
       {"sweep", "local", "cluster_spec", "results", "overwrite", "workers", "parallel",
        "device", "ps_server_binary", "ps_worker_binary"}},
      {"replay", 1, [](const std::vector<std::string>& args) { return Replay(args[0]); },
       "run a recorded ASYNC run again in its recorded order, to the same weights",
       "psctl replay RESULTS_DIR [--results=DIR] [--overwrite] [--device=cpu]\n\n"
       "RESULTS_DIR is a run whose job set \"record_apply_log\": true (apply_log/ in it). A local\n"
       "cluster of its size runs the job again, every ps serving each pull and applying each\n"
       "update at its turn in the recorded order: the final weights are the recorded run's, bit\n"
       "for bit, and the replay records its own log to compare (default --results:\n"
       "RESULTS_DIR-replay).\n\n"
       "Example:\n"
       "  psctl replay results/async   # -> results/async-replay",
       {"results", "overwrite", "device", "ps_server_binary", "ps_worker_binary"}},
      {"report", -1, [](const std::vector<std::string>& args) { return Report(args); },
       "a sweep's report with tables and plots, or runs side by side",
       "psctl report SWEEP_DIR | RUN_DIR [RUN_DIR...]\n\n"
       "A sweep's results directory (psctl experiment) gets report.md and plots/ there. Runs'\n"
       "results directories are printed side by side by their manifest.json: what ran, on\n"
       "which machines and build, what it reached, and the settings that differ; a single\n"
       "run also gets report.png (each worker's loss, rate and staleness, the evaluations'\n"
       "accuracy) and report.html there.\n\n"
       "Examples:\n"
       "  psctl report results/modes\n"
       "  psctl report results/default   # its table, then results/default/report.png\n"
       "  psctl report results/default results/async > compare.md",
       {"report_script", "python"}},
      {"slurm-spec", 0, [](const std::vector<std::string>&) { return SlurmSpec(); },
       "the ClusterSpec JSON of this Slurm job (with this task's, inside srun)",
       "psctl slurm-spec --slurm_num_ps=N [--slurm_base_port=8888]\n\n"
       "Inside a Slurm job every command takes --cluster_resolver=slurm instead of\n"
       "--cluster_spec.\n\n"
       "Example:\n"
       "  srun -n 4 psctl slurm-spec --slurm_num_ps=2",
       {"slurm_num_ps", "slurm_base_port", "task"}},
      {"dashboard", 0, [](const std::vector<std::string>&) { return Dashboard(); },
       "a status page with live charts of the cluster's jobs, until Ctrl-C",
       "psctl dashboard --cluster_spec=F [--bind_host=127.0.0.1] [--port=0] [--port_file=F]\n\n"
       "Example:\n"
       "  psctl dashboard --cluster_spec=cluster.json --port=8080   # http://127.0.0.1:8080/",
       {"cluster_spec", "bind_host", "port", "port_file"}},
      {"top", 0, [](const std::vector<std::string>&) { return Top(); },
       "a live view of every task and job in the terminal, until q or Ctrl-C",
       "psctl top --cluster_spec=F [--iterations=N]\n\n"
       "Each second: every task up or down, its CPU, memory and uptime; every job's state, step,\n"
       "examples/s, loss and staleness, whom a barrier waits for and for how long, and a row per\n"
       "worker. Not on a terminal, each screen follows the last after a blank line.\n\n"
       "Examples:\n"
       "  psctl top --cluster_spec=cluster.json\n"
       "  psctl top --cluster_spec=cluster.json --iterations=1 > cluster.txt",
       {"cluster_spec", "iterations"}},
      {"prometheus-config", 0,
       [](const std::vector<std::string>&) { return PrometheusConfigCommand(); },
       "a Prometheus scrape configuration for the cluster's /metrics pages",
       "psctl prometheus-config --cluster_spec=F [--out=F] [--scrape_interval=5s] [flags]\n\n"
       "Without --metrics_port each task is asked for its own /metrics port.\n\n"
       "Examples:\n"
       "  psctl prometheus-config --cluster_spec=cluster.json --out=prometheus.yml\n"
       "  psctl prometheus-config --cluster_spec=cluster.json --metrics_port=9100 "
       "--worker_metrics_port=9101",
       {"cluster_spec", "out", "scrape_interval", "metrics_port", "worker_metrics_port"}},
  };
}

const std::vector<Command>& Commands() {
  static const std::vector<Command>* const commands = [] {
    auto* all = new std::vector<Command>(JobAndClusterCommands());
    for (Command& command : ExperimentAndWatchCommands()) all->push_back(std::move(command));
    return all;
  }();
  return *commands;
}

const Command* FindCommand(const std::string& name) {
  for (const Command& command : Commands()) {
    if (name == command.name) return &command;
  }
  return nullptr;
}

// psctl --help: every command in a line.
std::string Usage() {
  std::string usage =
      "psctl: runs jobs on a parameter-server cluster and looks inside it.\n\n"
      "Usage: psctl COMMAND [flags]; psctl COMMAND --help for a command's flags and examples.\n\n"
      "Commands:\n";
  for (const Command& command : Commands()) {
    usage += absl::StrFormat("  %-18s %s\n", command.name, command.summary);
  }
  usage +=
      "\nEvery command that reaches a cluster takes --cluster_spec (or TF_CONFIG, or\n"
      "--cluster_resolver=slurm), and --certs=DIR (psctl certs) or --tls_cert, --tls_key,\n"
      "--tls_ca, --auth_token_file and --admin_token_file where the cluster uses them.";
  return usage;
}

// psctl COMMAND --help: its synopsis, examples and flags.
std::string CommandUsage(const Command& command) {
  return absl::StrCat("psctl ", command.name, ": ", command.summary, "\n\nUsage: ",
                      command.usage);
}

}  // namespace
}  // namespace ps

int main(int argc, char** argv) {
  if (ps::HelpRequested(argc, argv)) {
    // The command is the first word that is not a flag.
    const ps::Command* command = nullptr;
    for (int i = 1; i < argc && command == nullptr; ++i) {
      if (argv[i][0] != '-') command = ps::FindCommand(argv[i]);
    }
    if (command == nullptr) {
      std::cout << ps::Usage() << "\n";
      return 0;
    }
    ps::HandleHelp(argc, argv, ps::CommandUsage(*command), command->flags);
  }
  gflags::SetUsageMessage(ps::Usage());
  ps::SetVersionFlag();
  ps::ParseFlags(&argc, &argv);
  FLAGS_logtostderr = true;
  FLAGS_minloglevel = 1;  // Warnings and errors only: psctl talks through its own output.
  google::InitGoogleLogging(argv[0]);
  // Given no security flag, the credentials beside the ClusterSpec, where psctl local keeps its
  // cluster's.
  if (absl::Status certs =
          ps::ApplyCertsFlag({"psctl"}, ps::CredentialsBeside(FLAGS_cluster_spec));
      !certs.ok()) {
    std::cerr << "psctl: " << certs.message() << "\n";
    return 2;
  }
  ps::TransportSecurity security = ps::TransportSecurityFromFlags();
  for (std::string* path : {&security.cert_file, &security.key_file, &security.ca_file}) {
    if (!path->empty()) *path = std::filesystem::absolute(*path).string();  // For daemons too.
  }
  if (absl::Status tls = ps::ValidateTransportSecurity(security, /*server=*/false); !tls.ok()) {
    std::cerr << "psctl: " << tls.message() << "\n";
    return 2;
  }
  ps::SetProcessTransportSecurity(security);
  absl::StatusOr<ps::AuthTokens> tokens = ps::AuthTokensFromFlags();
  // Without a token of its own, the admin token beside the ClusterSpec, where psctl local
  // keeps its cluster's (readable by its user only).
  const std::string beside = ps::AdminTokenBeside(FLAGS_cluster_spec);
  if (tokens.ok() && !tokens->any() && !beside.empty()) tokens = ps::ReadAuthTokens("", beside);
  if (!tokens.ok()) {
    std::cerr << "psctl: " << tokens.status().message() << "\n";
    return 2;
  }
  ps::SetProcessAuthTokens(*tokens);
  const ps::Command* command = argc >= 2 ? ps::FindCommand(argv[1]) : nullptr;
  if (command == nullptr) {
    if (argc >= 2) {
      std::vector<std::string> names;
      for (const ps::Command& known : ps::Commands()) names.push_back(known.name);
      std::cerr << "psctl: unknown command \"" << argv[1] << "\""
                << ps::DidYouMean(argv[1], names) << "\n";
    }
    std::cerr << ps::Usage() << "\n";
    return 2;
  }
  if (command->num_args >= 0 ? argc != 2 + command->num_args : argc < 3) {
    std::cerr << "psctl " << command->name << ": " << argc - 2 << " words after the command, "
              << (command->num_args >= 0 ? absl::StrCat(command->num_args) : "one or more")
              << " expected\nUsage: " << command->usage << "\n";
    return 2;
  }
  // Ctrl-C and SIGTERM stop the job (and a local cluster) instead of killing psctl outright.
  ps::BlockStopSignals();
  std::thread([] {
    ps::WaitForStopSignal();
    ps::interrupted = true;
  }).detach();
  return command->run(std::vector<std::string>(argv + 2, argv + argc));
}
