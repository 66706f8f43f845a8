#include "common/cluster/cluster_spec.h"

#include <nlohmann/json.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/cluster/host_port.h"
#include "common/json_text.h"

namespace ps {
namespace {

using nlohmann::json;

constexpr absl::string_view kKnownJobs[] = {kPsJob, kWorkerJob};
constexpr absl::string_view kKnownJobsText = "\"ps\" and \"worker\"";
constexpr absl::string_view kExample =
    "{\"cluster\": {\"ps\": [\"host1:2222\"], \"worker\": [\"host2:2222\"]}, "
    "\"task\": {\"type\": \"ps\", \"index\": 0}}";

bool IsKnownJob(absl::string_view name) {
  for (absl::string_view known : kKnownJobs) {
    if (name == known) return true;
  }
  return false;
}

// The lower-cased TFJob replica types that run no daemon here. The training operator writes
// TF_CONFIG as {"cluster": {<type>: ["<job>-<type>-<i>.<namespace>.svc:<port>", ...], ...},
// "task": {"type": <type>, "index": i}, "environment": "cloud"} (kubeflow/training-operator,
// pkg/controller.v1/tensorflow/tensorflow.go, genTFConfigJSONStr and genClusterSpec); older
// releases (tf-operator) leave the evaluator out of "cluster" but still name it in "task".
bool IsTfJobReplica(absl::string_view name) {
  return name == kChiefJob || name == kMasterJob || name == kEvaluatorJob;
}

absl::Status Error(absl::string_view source, absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat(source, ": ", message));
}

absl::StatusOr<TaskId> ParseTaskObject(const json& task, absl::string_view source) {
  if (!task.is_object()) {
    return Error(source, "field \"task\" must be an object such as {\"type\": \"ps\", \"index\": 0}");
  }
  for (const auto& [key, value] : task.items()) {
    if (key != "type" && key != "index") {
      return Error(source, absl::StrCat("unknown field \"task.", key,
                                        "\"; a task has only \"type\" and \"index\""));
    }
  }
  auto type = task.find("type");
  if (type == task.end()) {
    return Error(source, "task type missing: add \"type\": \"ps\" or \"worker\" to \"task\"");
  }
  if (!type->is_string()) {
    return Error(source, "field \"task.type\" must be a string, \"ps\" or \"worker\"");
  }
  TaskId result;
  result.set_type(type->get<std::string>());
  if (!IsKnownJob(result.type()) && !IsTfJobReplica(result.type())) {
    return Error(source, absl::StrCat("unknown job name \"", result.type(),
                                      "\" in \"task.type\"; the jobs are ", kKnownJobsText,
                                      " (and a TFJob's \"chief\" and \"evaluator\")"));
  }
  auto index = task.find("index");
  if (index != task.end()) {  // TensorFlow's default is task 0.
    if (!index->is_number_integer() || index->get<int64_t>() < 0 ||
        index->get<int64_t>() > 1'000'000) {
      return Error(source, absl::StrCat("field \"task.index\" must be a non-negative integer, "
                                        "not ", index->dump()));
    }
    result.set_index(index->get<int>());
  }
  return result;
}

}  // namespace

std::string TaskName(const TaskId& task) { return absl::StrCat(task.type(), ":", task.index()); }

absl::StatusOr<TaskId> ParseTaskFlag(absl::string_view value) {
  size_t colon = value.find(':');
  if (colon == absl::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--task=", value, ": expected TYPE:INDEX, for example --task=ps:0 or --task=worker:1"));
  }
  TaskId task;
  task.set_type(std::string(value.substr(0, colon)));
  if (!IsKnownJob(task.type())) {
    return absl::InvalidArgumentError(absl::StrCat("--task=", value, ": unknown job name \"",
                                                   task.type(), "\"; the jobs are ",
                                                   kKnownJobsText));
  }
  absl::string_view index_text = value.substr(colon + 1);
  int index = -1;
  bool digits_only = !index_text.empty();
  for (char c : index_text) digits_only = digits_only && absl::ascii_isdigit(c);
  if (!digits_only || !absl::SimpleAtoi(index_text, &index)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--task=", value, ": the index \"", index_text, "\" must be a non-negative integer"));
  }
  task.set_index(index);
  return task;
}

absl::StatusOr<TaskId> TaskFromHostname(absl::string_view hostname) {
  const absl::string_view name = hostname.substr(0, hostname.find('.'));
  const std::string fix =
      "; --task_from_hostname needs a StatefulSet's pod, named <statefulset>-<ordinal>, of a "
      "StatefulSet named \"ps\" or \"worker\" (or ending in \"-ps\" or \"-worker\"), as in "
      "deploy/kubernetes/; or pass --task=ps:N";
  const size_t dash = name.rfind('-');
  const absl::string_view ordinal =
      dash == absl::string_view::npos ? absl::string_view() : name.substr(dash + 1);
  bool digits_only = !ordinal.empty() && (ordinal == "0" || ordinal[0] != '0');
  for (char c : ordinal) digits_only = digits_only && absl::ascii_isdigit(c);
  int index = -1;
  if (!digits_only || !absl::SimpleAtoi(ordinal, &index)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "host name \"", hostname, "\" does not end in a StatefulSet ordinal (-0, -1, ...)", fix));
  }
  absl::string_view job = name.substr(0, dash);
  job = job.substr(job.rfind('-') == absl::string_view::npos ? 0 : job.rfind('-') + 1);
  if (!IsKnownJob(job)) {
    return absl::InvalidArgumentError(absl::StrCat("host name \"", hostname, "\" names a \"", job,
                                                   "\" task, not a ps or worker task", fix));
  }
  TaskId task;
  task.set_type(std::string(job));
  task.set_index(index);
  return task;
}

absl::StatusOr<ClusterSpec> ClusterSpec::Parse(absl::string_view json_text,
                                               absl::string_view source) {
  absl::StatusOr<json> parsed = ParseJsonText(json_text);
  if (!parsed.ok()) {
    return Error(source, absl::StrCat("invalid JSON ", parsed.status().message(),
                                      "; fix the syntax (an example: ", kExample, ")"));
  }
  const json& document = *parsed;
  if (!document.is_object()) {
    return Error(source, absl::StrCat("expected a JSON object such as ", kExample));
  }
  if (document.contains("sparseCluster")) {
    return Error(source,
                 "\"sparseCluster\" names only some of the workers (a TFJob with "
                 "enableDynamicWorker: true); every task here needs the whole cluster: set "
                 "enableDynamicWorker: false");
  }

  // TensorFlow's form has "cluster" (and "task"); the bare form is the cluster itself.
  const json* cluster = &document;
  std::string field_prefix;
  ClusterSpec spec;
  if (document.contains("cluster")) {
    for (const auto& [key, value] : document.items()) {
      // TF_CONFIG may also carry "environment" and "rpc_layer"; neither changes anything here.
      if (key != "cluster" && key != "task" && key != "environment" && key != "rpc_layer") {
        return Error(source, absl::StrCat("unknown field \"", key,
                                          "\"; the fields are \"cluster\" and \"task\""));
      }
    }
    cluster = &document["cluster"];
    field_prefix = "cluster.";
    if (!cluster->is_object()) {
      return Error(source, "field \"cluster\" must be an object mapping job names to address "
                           "lists, such as {\"ps\": [\"host1:2222\"], \"worker\": [\"host2:2222\"]}");
    }
    if (document.contains("task")) {
      absl::StatusOr<TaskId> task = ParseTaskObject(document["task"], source);
      if (!task.ok()) return task.status();
      spec.task_ = *std::move(task);
    }
  } else if (document.contains("task")) {
    return Error(source, "field \"task\" needs the cluster under \"cluster\"; write " +
                             std::string(kExample));
  }

  ClusterDef def;
  for (const auto& [name, tasks] : cluster->items()) {
    std::string field = absl::StrCat(field_prefix, name);
    if (!field_prefix.empty() && IsTfJobReplica(name)) {  // A TFJob's; not part of the cluster.
      if (!tasks.is_array()) {
        return Error(source, absl::StrCat("field \"", field, "\" must be a list of addresses"));
      }
      std::vector<std::string>& replicas = spec.tfjob_replicas_[name];
      for (const json& replica : tasks) replicas.push_back(replica.dump());
      continue;
    }
    if (!IsKnownJob(name)) {
      return Error(source, absl::StrCat("unknown job name \"", field, "\"; the jobs are ",
                                        kKnownJobsText));
    }
    if (!tasks.is_array()) {
      return Error(source, absl::StrCat("field \"", field, "\" must be a list of \"host:port\" "
                                        "addresses, such as [\"host1:2222\", \"host2:2222\"]"));
    }
    ClusterJob* job = def.add_jobs();
    job->set_name(name);
    for (size_t i = 0; i < tasks.size(); ++i) {
      if (!tasks[i].is_string()) {
        return Error(source, absl::StrCat("field \"", field, "[", i, "]\" must be a \"host:port\" "
                                          "string, not ", tasks[i].dump()));
      }
      job->add_tasks(tasks[i].get<std::string>());
    }
  }
  absl::StatusOr<ClusterSpec> validated = FromProto(def);
  if (!validated.ok()) return Error(source, validated.status().message());
  validated->task_ = spec.task_;
  validated->tfjob_replicas_ = spec.tfjob_replicas_;
  if (spec.task_.has_value() && IsTfJobReplica(spec.task_->type())) {
    auto replicas = spec.tfjob_replicas_.find(spec.task_->type());
    // An evaluator may be missing from "cluster" (see IsTfJobReplica); a chief may not.
    const int size = replicas != spec.tfjob_replicas_.end()
                         ? static_cast<int>(replicas->second.size())
                     : spec.task_->type() == kEvaluatorJob ? spec.task_->index() + 1
                                                           : 0;
    if (spec.task_->index() >= size) {
      return Error(source,
                   absl::StrCat("field \"task\": ", TaskName(*spec.task_), " is not among the ",
                                size, " \"", spec.task_->type(), "\" replicas of \"cluster\""));
    }
  } else if (spec.task_.has_value()) {
    absl::Status status = validated->CheckTask(*spec.task_);
    if (!status.ok()) return Error(source, absl::StrCat("field \"task\": ", status.message()));
  }
  return validated;
}

absl::StatusOr<ClusterSpec> ClusterSpec::FromFile(const std::string& path, FileSystem* fs) {
  absl::StatusOr<std::string> text = fs->ReadFile(path);
  if (!text.ok()) {
    return absl::Status(text.status().code(),
                        absl::StrCat(path, ": cannot read the cluster spec file (",
                                     text.status().message(),
                                     "); check the path given to --cluster_spec"));
  }
  return Parse(*text, path);
}

absl::StatusOr<ClusterSpec> ClusterSpec::FromProto(const ClusterDef& cluster) {
  ClusterSpec spec;
  std::map<std::string, std::string> owner_by_address;  // Lower-cased address -> "ps[0]".
  for (const ClusterJob& job : cluster.jobs()) {
    if (!IsKnownJob(job.name())) {
      return absl::InvalidArgumentError(absl::StrCat("unknown job name \"", job.name(),
                                                     "\"; the jobs are ", kKnownJobsText));
    }
    if (spec.jobs_.count(job.name()) > 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("job \"", job.name(), "\" appears twice; list each job once"));
    }
    if (job.tasks().empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "job \"", job.name(), "\" is empty; list at least one \"host:port\" address"));
    }
    std::vector<std::string>& addresses = spec.jobs_[job.name()];
    for (int i = 0; i < job.tasks_size(); ++i) {
      std::string field = absl::StrCat(job.name(), "[", i, "]");
      absl::StatusOr<HostPort> parsed = ParseHostPort(job.tasks(i));
      if (!parsed.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("field \"", field, "\": ", parsed.status().message()));
      }
      auto [it, inserted] =
          owner_by_address.emplace(absl::AsciiStrToLower(parsed->ToString()), field);
      if (!inserted) {
        return absl::InvalidArgumentError(
            absl::StrCat("duplicate address \"", job.tasks(i), "\" in \"", it->second, "\" and \"",
                         field, "\"; give every task its own host:port"));
      }
      addresses.push_back(job.tasks(i));
    }
  }
  for (absl::string_view required : kKnownJobs) {
    if (spec.jobs_.count(required) == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "job \"", required, "\" is missing; a cluster needs at least one ps and one worker"));
    }
  }
  return spec;
}

const std::vector<std::string>& ClusterSpec::Tasks(absl::string_view job) const {
  static const std::vector<std::string> kNone;
  auto it = jobs_.find(job);
  return it == jobs_.end() ? kNone : it->second;
}

absl::Status ClusterSpec::CheckTask(const TaskId& task) const {
  auto it = jobs_.find(task.type());
  if (it == jobs_.end()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "unknown job name \"", task.type(), "\"; the jobs are ", kKnownJobsText));
  }
  int size = static_cast<int>(it->second.size());
  if (task.index() < 0 || task.index() >= size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "task index ", task.index(), " is out of range: job \"", task.type(), "\" has ", size,
        size == 1 ? " task (index 0)" : absl::StrCat(" tasks (indices 0 to ", size - 1, ")")));
  }
  return absl::OkStatus();
}

const std::string& ClusterSpec::Address(const TaskId& task) const {
  return jobs_.at(task.type()).at(task.index());
}

ClusterDef ClusterSpec::ToProto() const {
  ClusterDef def;
  for (const auto& [name, tasks] : jobs_) {
    ClusterJob* job = def.add_jobs();
    job->set_name(name);
    for (const std::string& address : tasks) job->add_tasks(address);
  }
  return def;
}

absl::Status ClusterSpec::CheckGrownInto(const ClusterSpec& grown) const {
  const std::vector<std::string>& ps = Tasks(kPsJob);
  const std::vector<std::string>& grown_ps = grown.Tasks(kPsJob);
  if (ps != grown_ps) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the grown cluster lists the ps tasks [", absl::StrJoin(grown_ps, ", "), "], this one [",
        absl::StrJoin(ps, ", "), "]: a cluster grows by workers only, its ps tasks stay"));
  }
  const std::vector<std::string>& workers = Tasks(kWorkerJob);
  const std::vector<std::string>& grown_workers = grown.Tasks(kWorkerJob);
  for (size_t w = 0; w < workers.size(); ++w) {
    if (w >= grown_workers.size() || grown_workers[w] != workers[w]) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the grown cluster ",
          w >= grown_workers.size() ? "lacks worker:" + std::to_string(w)
                                    : absl::StrCat("runs worker:", w, " at ", grown_workers[w]),
          ", which runs at ", workers[w],
          ": a cluster grows by adding workers after its own, each of these at its address"));
    }
  }
  return absl::OkStatus();
}

std::string ClusterSpec::ToJson(const std::optional<TaskId>& task, int indent) const {
  json document;
  document["cluster"] = json::object();
  for (const auto& [name, tasks] : jobs_) document["cluster"][name] = tasks;
  // A TFJob replica's task needs its job listed to parse back (found by cluster_spec_fuzz);
  // otherwise the cluster is its ps and worker jobs alone.
  if (task.has_value()) {
    auto replicas = tfjob_replicas_.find(task->type());
    if (replicas != tfjob_replicas_.end()) {
      json& listed = document["cluster"][task->type()] = json::array();
      for (const std::string& replica : replicas->second) listed.push_back(json::parse(replica));
    }
  }
  if (task.has_value()) document["task"] = {{"type", task->type()}, {"index", task->index()}};
  return document.dump(indent);
}

namespace {

constexpr absl::string_view kSlurmResolver = "slurm";

// The task of Slurm rank `rank`: the first `num_ps` ranks are the ps tasks.
TaskId TaskOfRank(int rank, int num_ps) {
  TaskId task;
  task.set_type(std::string(rank < num_ps ? kPsJob : kWorkerJob));
  task.set_index(rank < num_ps ? rank : rank - num_ps);
  return task;
}

// The cluster of the Slurm job step in `environment`; the step read is left in `step`.
absl::StatusOr<ClusterSpec> LoadSlurmCluster(const ClusterSource& source,
                                             const Environment& environment, SlurmStep* step) {
  if (!source.cluster_spec_path.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--cluster_spec=", source.cluster_spec_path,
                     " and --cluster_resolver=slurm both name a cluster; give one of them"));
  }
  absl::StatusOr<SlurmStep> read = ReadSlurmStep(environment);
  if (!read.ok()) return read.status();
  *step = *std::move(read);
  const int num_tasks = static_cast<int>(step->tasks.size());
  const int num_ps = source.slurm.num_ps;
  if (num_ps < 1 || num_ps >= num_tasks) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--slurm_num_ps=", num_ps, " must be at least 1 and leave a worker among the ", num_tasks,
        " tasks of ", step->source, "; ask Slurm for more tasks (sbatch --ntasks) or fewer ps"));
  }
  absl::StatusOr<std::vector<std::string>> addresses =
      SlurmTaskAddresses(*step, source.slurm.base_port);
  if (!addresses.ok()) return addresses.status();
  ClusterDef def;
  ClusterJob* ps = def.add_jobs();
  ps->set_name(std::string(kPsJob));
  ClusterJob* workers = def.add_jobs();
  workers->set_name(std::string(kWorkerJob));
  for (int rank = 0; rank < num_tasks; ++rank) {
    (rank < num_ps ? ps : workers)->add_tasks((*addresses)[rank]);
  }
  absl::StatusOr<ClusterSpec> cluster = ClusterSpec::FromProto(def);
  if (!cluster.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(step->source, ": ", cluster.status().message()));
  }
  return cluster;
}

// "Slurm rank 2 of 4 on n1, local task 0; SLURM_STEP_NODELIST=..., --slurm_num_ps=2, ...".
std::string SlurmOrigin(const SlurmStep& step, const SlurmClusterOptions& options) {
  std::string rank;
  if (step.rank.has_value()) {
    const SlurmTask& task = step.tasks[*step.rank];
    rank = absl::StrCat(" rank ", *step.rank, " of ", step.tasks.size(), " on ", task.node,
                        ", local task ", task.local_id);
  }
  return absl::StrCat("Slurm", rank, "; ", step.source, ", --slurm_num_ps=", options.num_ps,
                      ", --slurm_base_port=", options.base_port);
}

}  // namespace

absl::StatusOr<ClusterSpec> LoadClusterSpec(const ClusterSource& source,
                                            const Environment& environment) {
  if (source.resolver == kSlurmResolver) {
    SlurmStep step;
    return LoadSlurmCluster(source, environment, &step);
  }
  if (!source.resolver.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "unknown --cluster_resolver=", source.resolver,
        "; the one resolver is \"slurm\" (without it the cluster comes from --cluster_spec or "
        "TF_CONFIG)"));
  }
  if (!source.cluster_spec_path.empty()) return ClusterSpec::FromFile(source.cluster_spec_path);
  const std::string* tf_config = FindVariable(environment, "TF_CONFIG");
  if (tf_config != nullptr && !tf_config->empty()) {
    return ClusterSpec::Parse(*tf_config, "TF_CONFIG");
  }
  return absl::InvalidArgumentError(
      "no cluster given: pass --cluster_spec=FILE (see config/clusters/), set TF_CONFIG, or pass "
      "--cluster_resolver=slurm in a Slurm job");
}

absl::StatusOr<ClusterConfig> ResolveClusterConfig(const ClusterSource& source,
                                                   const Environment& environment) {
  const bool slurm = source.resolver == kSlurmResolver;
  SlurmStep step;
  absl::StatusOr<ClusterSpec> cluster =
      slurm ? LoadSlurmCluster(source, environment, &step) : LoadClusterSpec(source, environment);
  if (!cluster.ok()) return cluster.status();

  // The task the cluster names, and where it came from.
  std::optional<TaskId> named = cluster->task();
  std::string origin = source.cluster_spec_path.empty() ? "TF_CONFIG" : source.cluster_spec_path;
  if (slurm) {
    if (step.rank.has_value()) named = TaskOfRank(*step.rank, source.slurm.num_ps);
    origin = SlurmOrigin(step, source.slurm);
  }

  if (source.task_from_hostname && (!source.task_flag.empty() || slurm)) {
    return absl::InvalidArgumentError(absl::StrCat("--task_from_hostname and ",
                                                   slurm ? "--cluster_resolver=slurm" : "--task",
                                                   " both name the task; give one of them"));
  }

  TaskId task;
  if (source.task_from_hostname) {
    absl::StatusOr<TaskId> parsed = TaskFromHostname(source.hostname);
    if (!parsed.ok()) return parsed.status();
    task = *parsed;
    absl::Status status = cluster->CheckTask(task);
    if (!status.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("host name \"", source.hostname, "\" is ",
                                                     TaskName(task), " of ", origin, ": ",
                                                     status.message()));
    }
    origin = absl::StrCat(origin, ", task from host name ", source.hostname);
  } else if (!source.task_flag.empty()) {
    absl::StatusOr<TaskId> parsed = ParseTaskFlag(source.task_flag);
    if (!parsed.ok()) return parsed.status();
    task = *parsed;
    absl::Status status = cluster->CheckTask(task);
    if (!status.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--task=", source.task_flag, ": ", status.message()));
    }
  } else if (named.has_value() && IsTfJobReplica(named->type())) {
    return absl::FailedPreconditionError(absl::StrCat(
        origin, " names this replica ", TaskName(*named), ", which runs no daemon: ",
        named->type() == kEvaluatorJob
            ? "this service has no evaluator (worker 0 evaluates on the test split every "
              "eval_interval steps); remove the Evaluator replicas from the TFJob"
            : "a TFJob's chief runs `psctl submit` (deploy/kubernetes/tfjob.yaml), and ps_server "
              "and ps_worker run as its PS and Worker replicas"));
  } else if (named.has_value()) {
    task = *named;
  } else if (slurm) {
    return absl::FailedPreconditionError(absl::StrCat(
        "SLURM_PROCID is unset (", step.source,
        "): start each task with srun, as deploy/slurm/ps_job.sbatch does, or pass --task=ps:0 (or "
        "worker:N)"));
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "no task given: pass --task=ps:0 (or worker:N), or add \"task\": {\"type\": \"ps\", "
        "\"index\": 0} to ",
        origin));
  }
  ClusterConfig config{*std::move(cluster), task, origin, std::nullopt};
  if (slurm && source.task_flag.empty() && task.type() == kWorkerJob) {
    config.node_worker_index = NodeWorkerIndex(step, *step.rank, source.slurm.num_ps);
  }
  return config;
}

}  // namespace ps
