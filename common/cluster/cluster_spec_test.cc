#include "common/cluster/cluster_spec.h"

#include <cstdlib>
#include <fstream>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "common/testing/fault_injecting_file_system.h"

namespace ps {
namespace {

TaskId Task(const std::string& type, int index) {
  TaskId task;
  task.set_type(type);
  task.set_index(index);
  return task;
}

struct ValidCase {
  const char* name;
  const char* json;
  int num_ps;
  int num_workers;
  bool has_task;
  const char* task_type;
  int task_index;
};

TEST(ClusterSpecTest, ParsesValidForms) {
  const ValidCase kCases[] = {
      {"tensorflow form with task",
       R"({"cluster": {"ps": ["h1:2222", "h2:2222"], "worker": ["h3:2222"]},
           "task": {"type": "worker", "index": 0}})",
       2, 1, true, "worker", 0},
      {"tensorflow form without task",
       R"({"cluster": {"ps": ["h1:2222"], "worker": ["h2:2222", "h3:2222"]}})", 1, 2, false, "", 0},
      {"bare form", R"({"ps": ["127.0.0.1:2222"], "worker": ["127.0.0.1:2223"]})", 1, 1, false,
       "", 0},
      {"ipv6", R"({"ps": ["[::1]:2222"], "worker": ["[::1]:2223"]})", 1, 1, false, "", 0},
      {"task index defaults to 0",
       R"({"cluster": {"ps": ["h1:1"], "worker": ["h2:1"]}, "task": {"type": "ps"}})", 1, 1, true,
       "ps", 0},
      {"TF_CONFIG extras",
       R"({"cluster": {"ps": ["h1:1"], "worker": ["h2:1"]}, "task": {"type": "ps", "index": 0},
           "environment": "cloud", "rpc_layer": "grpc"})",
       1, 1, true, "ps", 0},
  };
  for (const ValidCase& c : kCases) {
    SCOPED_TRACE(c.name);
    absl::StatusOr<ClusterSpec> spec = ClusterSpec::Parse(c.json, "test.json");
    ASSERT_TRUE(spec.ok()) << spec.status();
    EXPECT_EQ(spec->NumTasks("ps"), c.num_ps);
    EXPECT_EQ(spec->NumTasks("worker"), c.num_workers);
    EXPECT_EQ(spec->task().has_value(), c.has_task);
    if (c.has_task) {
      EXPECT_EQ(spec->task()->type(), c.task_type);
      EXPECT_EQ(spec->task()->index(), c.task_index);
    }
  }
}

struct InvalidCase {
  const char* name;
  const char* json;
  // Every part must appear in the message.
  std::vector<const char*> message_parts;
};

TEST(ClusterSpecTest, RejectsInvalidSpecsNamingSourceFieldAndFix) {
  const InvalidCase kCases[] = {
      {"invalid JSON with line and column", "{\n  \"ps\": [\"h1:1\",\n}",
       {"bad.json: invalid JSON", "line 3, column 1", "fix the syntax"}},
      {"empty text", "", {"bad.json: invalid JSON", "line 1, column 1"}},
      {"not an object", R"(["h1:1"])", {"bad.json", "expected a JSON object"}},
      {"unknown job name", R"({"cluster": {"ps": ["h1:1"], "wokrer": ["h2:1"]}})",
       {"bad.json", "unknown job name \"cluster.wokrer\"", "\"ps\" and \"worker\""}},
      {"unknown job name, bare form", R"({"ps": ["h1:1"], "chief": ["h2:1"]})",
       {"unknown job name \"chief\""}},
      {"unknown top-level field", R"({"cluster": {"ps": ["h1:1"], "worker": ["h2:1"]}, "tsk": {}})",
       {"unknown field \"tsk\""}},
      {"empty job", R"({"ps": [], "worker": ["h2:1"]})",
       {"job \"ps\" is empty", "at least one \"host:port\""}},
      {"missing job", R"({"cluster": {"worker": ["h2:1"]}})", {"job \"ps\" is missing"}},
      {"job not a list", R"({"ps": "h1:1", "worker": ["h2:1"]})",
       {"field \"ps\" must be a list"}},
      {"address not a string", R"({"ps": [2222], "worker": ["h2:1"]})",
       {"field \"ps[0]\" must be a \"host:port\" string"}},
      {"duplicate address", R"({"ps": ["h1:1", "h2:1"], "worker": ["H2:1"]})",
       {"duplicate address \"H2:1\"", "\"ps[1]\"", "\"worker[0]\"", "its own host:port"}},
      {"bad port", R"({"ps": ["h1:99999"], "worker": ["h2:1"]})",
       {"field \"ps[0]\"", "bad port \"99999\"", "1 to 65535"}},
      {"missing port", R"({"ps": ["h1"], "worker": ["h2:1"]})", {"field \"ps[0]\"", "no port"}},
      {"malformed host", R"({"ps": ["h_1:1"], "worker": ["h2:1"]})",
       {"field \"ps[0]\"", "malformed host \"h_1\""}},
      {"unbracketed ipv6", R"({"ps": ["::1:2222"], "worker": ["h2:1"]})",
       {"brackets", "[::1]:2222"}},
      {"task index out of range",
       R"({"cluster": {"ps": ["h1:1", "h2:1"], "worker": ["h3:1"]}, "task": {"type": "ps", "index": 2}})",
       {"task index 2 is out of range", "has 2 tasks (indices 0 to 1)"}},
      {"negative task index",
       R"({"cluster": {"ps": ["h1:1"], "worker": ["h3:1"]}, "task": {"type": "ps", "index": -1}})",
       {"\"task.index\" must be a non-negative integer"}},
      {"task type missing", R"({"cluster": {"ps": ["h1:1"], "worker": ["h3:1"]}, "task": {"index": 0}})",
       {"task type missing", "\"type\": \"ps\""}},
      {"unknown task type",
       R"({"cluster": {"ps": ["h1:1"], "worker": ["h3:1"]}, "task": {"type": "trainer"}})",
       {"unknown job name \"trainer\"", "a TFJob's \"chief\""}},
      {"task without cluster", R"({"ps": ["h1:1"], "worker": ["h3:1"], "task": {"type": "ps"}})",
       {"needs the cluster under \"cluster\""}},
  };
  for (const InvalidCase& c : kCases) {
    SCOPED_TRACE(c.name);
    absl::StatusOr<ClusterSpec> spec = ClusterSpec::Parse(c.json, "bad.json");
    ASSERT_FALSE(spec.ok());
    EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(spec.status().message().rfind("bad.json: ", 0), 0u) << spec.status().message();
    for (const char* part : c.message_parts) {
      EXPECT_NE(spec.status().message().find(part), absl::string_view::npos)
          << "missing \"" << part << "\" in: " << spec.status().message();
    }
  }
}

TEST(ClusterSpecTest, TaskFlag) {
  absl::StatusOr<TaskId> task = ParseTaskFlag("worker:12");
  ASSERT_TRUE(task.ok()) << task.status();
  EXPECT_EQ(task->type(), "worker");
  EXPECT_EQ(task->index(), 12);
  EXPECT_EQ(TaskName(*task), "worker:12");

  const std::pair<const char*, const char*> kBad[] = {
      {"ps", "expected TYPE:INDEX"},
      {"ps:", "must be a non-negative integer"},
      {"ps:-1", "must be a non-negative integer"},
      {"ps:x", "must be a non-negative integer"},
      {"master:0", "unknown job name \"master\""},
  };
  for (const auto& [flag, part] : kBad) {
    absl::StatusOr<TaskId> bad = ParseTaskFlag(flag);
    ASSERT_FALSE(bad.ok()) << flag;
    EXPECT_NE(bad.status().message().find(part), absl::string_view::npos)
        << flag << " gave: " << bad.status().message();
  }
}

TEST(ClusterSpecTest, JsonAndProtoRoundTrip) {
  absl::StatusOr<ClusterSpec> spec =
      ClusterSpec::Parse(R"({"ps": ["h1:1", "[::1]:2"], "worker": ["h3:3"]})", "test.json");
  ASSERT_TRUE(spec.ok()) << spec.status();

  absl::StatusOr<ClusterSpec> from_json = ClusterSpec::Parse(spec->ToJson(Task("ps", 1)), "again");
  ASSERT_TRUE(from_json.ok()) << from_json.status();
  EXPECT_EQ(from_json->Tasks("ps"), spec->Tasks("ps"));
  EXPECT_EQ(from_json->Tasks("worker"), spec->Tasks("worker"));
  ASSERT_TRUE(from_json->task().has_value());
  EXPECT_EQ(TaskName(*from_json->task()), "ps:1");

  ClusterDef def = spec->ToProto();
  ASSERT_EQ(def.jobs_size(), 2);
  EXPECT_EQ(def.jobs(0).name(), "ps");
  absl::StatusOr<ClusterSpec> from_proto = ClusterSpec::FromProto(def);
  ASSERT_TRUE(from_proto.ok()) << from_proto.status();
  EXPECT_EQ(from_proto->Tasks("ps"), spec->Tasks("ps"));
  EXPECT_EQ(from_proto->Address(Task("ps", 1)), "[::1]:2");
}

TEST(ClusterSpecTest, AClusterGrowsByWorkersAddedAfterItsOwn) {
  auto parse = [](const char* json) {
    absl::StatusOr<ClusterSpec> spec = ClusterSpec::Parse(json, "test.json");
    EXPECT_TRUE(spec.ok()) << spec.status();
    return *spec;
  };
  const ClusterSpec two = parse(R"({"ps": ["h1:1"], "worker": ["h2:1", "h2:2"]})");
  EXPECT_TRUE(two.CheckGrownInto(two).ok());
  EXPECT_TRUE(two.CheckGrownInto(parse(R"({"ps": ["h1:1"], "worker": ["h2:1", "h2:2", "h3:1"]})"))
                  .ok());
  absl::Status status =
      two.CheckGrownInto(parse(R"({"ps": ["h1:1", "h1:2"], "worker": ["h2:1", "h2:2"]})"));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("its ps tasks stay"), std::string::npos) << status;
  status = two.CheckGrownInto(parse(R"({"ps": ["h1:1"], "worker": ["h2:1", "h3:1", "h2:2"]})"));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("runs worker:1 at h3:1, which runs at h2:2"), std::string::npos)
      << status;
  status = two.CheckGrownInto(parse(R"({"ps": ["h1:1"], "worker": ["h2:1"]})"));
  EXPECT_NE(status.message().find("lacks worker:1"), std::string::npos) << status;
}

TEST(ClusterSpecTest, FromProtoRejectsRepeatedJob) {
  ClusterDef def;
  for (const char* name : {"ps", "ps", "worker"}) {
    ClusterJob* job = def.add_jobs();
    job->set_name(name);
    job->add_tasks(absl::StrCat("h", def.jobs_size(), ":1"));
  }
  absl::StatusOr<ClusterSpec> spec = ClusterSpec::FromProto(def);
  ASSERT_FALSE(spec.ok());
  EXPECT_NE(spec.status().message().find("appears twice"), absl::string_view::npos);
}

class ResolveClusterConfigTest : public testing::Test {
 protected:
  std::string WriteFile(const std::string& name, const std::string& text) {
    std::string path = std::string(std::getenv("TEST_TMPDIR")) + "/" + name;
    std::ofstream(path) << text;
    return path;
  }
  static ClusterSource FileSource(const std::string& path, const std::string& task_flag = "") {
    ClusterSource source;
    source.cluster_spec_path = path;
    source.task_flag = task_flag;
    return source;
  }
  static constexpr const char* kSpec =
      R"({"cluster": {"ps": ["h1:1", "h2:1"], "worker": ["h3:1"]}, "task": {"type": "ps", "index": 1}})";
};

TEST_F(ResolveClusterConfigTest, FileWithTaskFieldAndFlagOverride) {
  std::string path = WriteFile("spec.json", kSpec);
  absl::StatusOr<ClusterConfig> config = ResolveClusterConfig(FileSource(path), {});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(TaskName(config->task), "ps:1");
  EXPECT_EQ(config->cluster.Address(config->task), "h2:1");
  EXPECT_EQ(config->origin, path);

  config = ResolveClusterConfig(FileSource(path, "worker:0"), {{"TF_CONFIG", "ignored"}});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(TaskName(config->task), "worker:0");
  EXPECT_FALSE(config->node_worker_index.has_value());
}

TEST_F(ResolveClusterConfigTest, TfConfigWhenNoFile) {
  absl::StatusOr<ClusterConfig> config = ResolveClusterConfig({}, {{"TF_CONFIG", kSpec}});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(TaskName(config->task), "ps:1");
  EXPECT_EQ(config->origin, "TF_CONFIG");

  config = ResolveClusterConfig({}, {{"TF_CONFIG", R"({"cluster": {"ps": ["h1:1"]}})"}});
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().message().rfind("TF_CONFIG: ", 0), 0u) << config.status();
}

TEST_F(ResolveClusterConfigTest, ErrorsSayWhatIsMissing) {
  absl::StatusOr<ClusterConfig> config = ResolveClusterConfig(FileSource("", "ps:0"), {});
  ASSERT_FALSE(config.ok());
  EXPECT_NE(config.status().message().find("pass --cluster_spec=FILE"), absl::string_view::npos);
  EXPECT_NE(config.status().message().find("--cluster_resolver=slurm"), absl::string_view::npos);

  config = ResolveClusterConfig(FileSource("", "ps:0"), {{"TF_CONFIG", ""}});
  ASSERT_FALSE(config.ok());
  EXPECT_NE(config.status().message().find("no cluster given"), absl::string_view::npos);

  config = ResolveClusterConfig(FileSource("/nonexistent/spec.json", "ps:0"), {});
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(config.status().message().find("/nonexistent/spec.json"), absl::string_view::npos);

  std::string no_task = WriteFile("no_task.json", R"({"ps": ["h1:1"], "worker": ["h3:1"]})");
  config = ResolveClusterConfig(FileSource(no_task), {});
  ASSERT_FALSE(config.ok());
  EXPECT_NE(config.status().message().find("no task given"), absl::string_view::npos);

  config = ResolveClusterConfig(FileSource(no_task, "worker:1"), {});
  ASSERT_FALSE(config.ok());
  EXPECT_NE(config.status().message().find("--task=worker:1: task index 1 is out of range"),
            absl::string_view::npos)
      << config.status();

  ClusterSource unknown;
  unknown.resolver = "kubernetes";
  config = ResolveClusterConfig(unknown, {});
  ASSERT_FALSE(config.ok());
  EXPECT_NE(config.status().message().find("unknown --cluster_resolver=kubernetes"),
            absl::string_view::npos);
}

TEST(TaskFromHostnameTest, TheOrdinalIsTheIndexAndTheNameTheJob) {
  const std::pair<const char*, const char*> kCases[] = {
      {"ps-0", "ps:0"},
      {"ps-3", "ps:3"},
      {"worker-0", "worker:0"},
      {"worker-12", "worker:12"},
      {"mnist-ps-1", "ps:1"},
      {"my-team-worker-7", "worker:7"},
      {"ps-2.ps.default.svc.cluster.local", "ps:2"},
  };
  for (const auto& [hostname, task] : kCases) {
    absl::StatusOr<TaskId> parsed = TaskFromHostname(hostname);
    ASSERT_TRUE(parsed.ok()) << hostname << ": " << parsed.status();
    EXPECT_EQ(TaskName(*parsed), task) << hostname;
  }
}

TEST(TaskFromHostnameTest, ErrorsSayWhatTheNameLacksAndHowToNameTheStatefulSets) {
  const std::pair<const char*, const char*> kCases[] = {
      {"ps", "does not end in a StatefulSet ordinal"},
      {"ps-", "does not end in a StatefulSet ordinal"},
      {"ps-01", "does not end in a StatefulSet ordinal"},
      {"ps-x1", "does not end in a StatefulSet ordinal"},
      {"", "does not end in a StatefulSet ordinal"},
      {"node7.example.com", "does not end in a StatefulSet ordinal"},
      {"chief-0", "names a \"chief\" task, not a ps or worker task"},
      {"mnist-evaluator-0", "names a \"evaluator\" task"},
      {"workers-0", "names a \"workers\" task"},
      {"-0", "names a \"\" task"},
  };
  for (const auto& [hostname, message] : kCases) {
    absl::StatusOr<TaskId> parsed = TaskFromHostname(hostname);
    ASSERT_FALSE(parsed.ok()) << hostname;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(parsed.status().message().find(message), absl::string_view::npos) << parsed.status();
    EXPECT_NE(parsed.status().message().find("StatefulSet named \"ps\" or \"worker\""),
              absl::string_view::npos)
        << parsed.status();
  }
}

TEST_F(ResolveClusterConfigTest, TaskFromHostnameWithAConfigMapSpec) {
  const std::string path = WriteFile(
      "statefulsets.json",
      R"({"cluster": {"ps": ["ps-0.ps:2222", "ps-1.ps:2222"], "worker": ["worker-0.worker:2222"]}})");
  ClusterSource source = FileSource(path);
  source.task_from_hostname = true;
  source.hostname = "ps-1";
  absl::StatusOr<ClusterConfig> config = ResolveClusterConfig(source, {});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(TaskName(config->task), "ps:1");
  EXPECT_EQ(config->cluster.Address(config->task), "ps-1.ps:2222");
  EXPECT_EQ(config->origin, path + ", task from host name ps-1");

  source.hostname = "worker-0";
  config = ResolveClusterConfig(source, {});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(TaskName(config->task), "worker:0");

  // The host name overrides the file's "task", as --task does.
  source.cluster_spec_path = WriteFile("with_task.json", kSpec);
  source.hostname = "ps-0";
  config = ResolveClusterConfig(source, {});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(TaskName(config->task), "ps:0");
}

TEST_F(ResolveClusterConfigTest, TaskFromHostnameErrors) {
  const std::string path = WriteFile("two_ps.json", kSpec);
  ClusterSource source = FileSource(path);
  source.task_from_hostname = true;
  source.hostname = "ps-2";  // The StatefulSet has more replicas than the ClusterSpec.
  absl::StatusOr<ClusterConfig> config = ResolveClusterConfig(source, {});
  ASSERT_FALSE(config.ok());
  EXPECT_NE(config.status().message().find("host name \"ps-2\" is ps:2 of " + path +
                                           ": task index 2 is out of range"),
            absl::string_view::npos)
      << config.status();

  source.hostname = "ps";
  config = ResolveClusterConfig(source, {});
  ASSERT_FALSE(config.ok());
  EXPECT_NE(config.status().message().find("does not end in a StatefulSet ordinal"),
            absl::string_view::npos);

  source.hostname = "ps-0";
  source.task_flag = "ps:1";
  config = ResolveClusterConfig(source, {});
  ASSERT_FALSE(config.ok());
  EXPECT_NE(config.status().message().find("--task_from_hostname and --task both name the task"),
            absl::string_view::npos);
}

// TF_CONFIG as Kubeflow's training operator writes it for each replica of a TFJob named "mnist" in
// namespace "kubeflow" with a Chief, 2 PS, 2 Workers and an Evaluator: Go's json.Marshal of its
// TFConfig struct (cluster with sorted keys, task, environment), no spaces
// (kubeflow/training-operator, pkg/controller.v1/tensorflow/tensorflow.go: genTFConfigJSONStr).
std::string OperatorTfConfig(const std::string& type, int index, bool with_evaluator = true) {
  return absl::StrCat(
      R"({"cluster":{"chief":["mnist-chief-0.kubeflow.svc:2222"],)",
      with_evaluator ? R"("evaluator":["mnist-evaluator-0.kubeflow.svc:2222"],)" : "",
      R"("ps":["mnist-ps-0.kubeflow.svc:2222","mnist-ps-1.kubeflow.svc:2222"],)",
      R"("worker":["mnist-worker-0.kubeflow.svc:2222","mnist-worker-1.kubeflow.svc:2222"]},)",
      R"("task":{"type":")", type, R"(","index":)", index, R"(},"environment":"cloud"})");
}

TEST_F(ResolveClusterConfigTest, KubeflowTfJobPsAndWorkerReplicasRunTheirDaemons) {
  EXPECT_EQ(
      OperatorTfConfig("worker", 1),
      R"({"cluster":{"chief":["mnist-chief-0.kubeflow.svc:2222"],"evaluator":["mnist-evaluator-0.kubeflow.svc:2222"],"ps":["mnist-ps-0.kubeflow.svc:2222","mnist-ps-1.kubeflow.svc:2222"],"worker":["mnist-worker-0.kubeflow.svc:2222","mnist-worker-1.kubeflow.svc:2222"]},"task":{"type":"worker","index":1},"environment":"cloud"})");
  for (const auto& [type, index] : std::vector<std::pair<std::string, int>>{
           {"ps", 0}, {"ps", 1}, {"worker", 0}, {"worker", 1}}) {
    for (bool with_evaluator : {true, false}) {
      SCOPED_TRACE(absl::StrCat(type, ":", index, with_evaluator ? "" : ", no evaluator"));
      absl::StatusOr<ClusterConfig> config =
          ResolveClusterConfig({}, {{"TF_CONFIG", OperatorTfConfig(type, index, with_evaluator)}});
      ASSERT_TRUE(config.ok()) << config.status();
      EXPECT_EQ(TaskName(config->task), absl::StrCat(type, ":", index));
      // The cluster is the ps and worker jobs alone.
      EXPECT_EQ(
          config->cluster.ToJson(std::nullopt, -1),
          R"({"cluster":{"ps":["mnist-ps-0.kubeflow.svc:2222","mnist-ps-1.kubeflow.svc:2222"],)"
          R"("worker":["mnist-worker-0.kubeflow.svc:2222","mnist-worker-1.kubeflow.svc:2222"]}})");
      EXPECT_EQ(config->cluster.Address(config->task),
                absl::StrCat("mnist-", type, "-", index, ".kubeflow.svc:2222"));
    }
  }
}

TEST_F(ResolveClusterConfigTest, KubeflowTfJobChiefRunsPsctlAndEvaluatorIsRefused) {
  // The chief's TF_CONFIG is what psctl reads (LoadClusterSpec): the ps and worker jobs.
  absl::StatusOr<ClusterSpec> cluster =
      LoadClusterSpec({}, {{"TF_CONFIG", OperatorTfConfig("chief", 0)}});
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  EXPECT_EQ(cluster->NumTasks(kPsJob), 2);
  EXPECT_EQ(cluster->NumTasks(kWorkerJob), 2);
  EXPECT_EQ(TaskName(*cluster->task()), "chief:0");
  EXPECT_TRUE(cluster->Tasks(kChiefJob).empty());

  // A daemon started as the chief is refused, saying what the chief runs.
  absl::StatusOr<ClusterConfig> config =
      ResolveClusterConfig({}, {{"TF_CONFIG", OperatorTfConfig("chief", 0)}});
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(config.status().message().find("TF_CONFIG names this replica chief:0"),
            absl::string_view::npos)
      << config.status();
  EXPECT_NE(config.status().message().find("runs `psctl submit`"), absl::string_view::npos);

  // The evaluator, listed in "cluster" (training-operator) or not (tf-operator), is refused.
  for (bool listed : {true, false}) {
    cluster = LoadClusterSpec({}, {{"TF_CONFIG", OperatorTfConfig("evaluator", 0, listed)}});
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    config = ResolveClusterConfig({}, {{"TF_CONFIG", OperatorTfConfig("evaluator", 0, listed)}});
    ASSERT_FALSE(config.ok());
    EXPECT_NE(config.status().message().find("this service has no evaluator (worker 0 evaluates"),
              absl::string_view::npos)
        << config.status();
  }

  // TF 1's "master" is a chief.
  cluster = LoadClusterSpec(
      {},
      {{"TF_CONFIG",
        R"({"cluster":{"master":["j-master-0.ns.svc:2222"],"ps":["j-ps-0.ns.svc:2222"],"worker":["j-worker-0.ns.svc:2222"]},"task":{"type":"master","index":0},"environment":"cloud"})"}});
  ASSERT_TRUE(cluster.ok()) << cluster.status();
}

TEST_F(ResolveClusterConfigTest, KubeflowTfJobErrors) {
  // enableDynamicWorker: true writes a sparse cluster (SparseTFConfig).
  absl::StatusOr<ClusterConfig> config = ResolveClusterConfig(
      {},
      {{"TF_CONFIG",
        R"({"sparseCluster":{"worker":{"1":"mnist-worker-1.kubeflow.svc:2222"},"ps":["mnist-ps-0.kubeflow.svc:2222"]},"task":{"type":"worker","index":1}})"}});
  ASSERT_FALSE(config.ok());
  EXPECT_NE(config.status().message().find("set enableDynamicWorker: false"),
            absl::string_view::npos)
      << config.status();

  // A chief index beyond the chief replicas.
  config = ResolveClusterConfig({}, {{"TF_CONFIG", OperatorTfConfig("chief", 1)}});
  ASSERT_FALSE(config.ok());
  EXPECT_NE(config.status().message().find("chief:1 is not among the 1 \"chief\" replicas"),
            absl::string_view::npos)
      << config.status();

  // The TFJob's jobs do not make a bare-form cluster valid.
  absl::StatusOr<ClusterSpec> bare =
      ClusterSpec::Parse(R"({"ps": ["h1:1"], "worker": ["h2:1"], "chief": ["h3:1"]})", "x.json");
  EXPECT_FALSE(bare.ok());
}

// --cluster_resolver=slurm in a step of 5 tasks: 3 on n1, 2 on n2.
class SlurmClusterConfigTest : public testing::Test {
 protected:
  static ClusterSource SlurmSource(int num_ps) {
    ClusterSource source;
    source.resolver = "slurm";
    source.slurm.num_ps = num_ps;
    source.slurm.base_port = 7000;
    return source;
  }
  // What srun gives rank `rank`.
  static Environment TaskEnvironment(int rank) {
    return {{"SLURM_JOB_NODELIST", "n[1-2]"},
            {"SLURM_TASKS_PER_NODE", "3,2"},
            {"SLURM_STEP_NODELIST", "n[1-2]"},
            {"SLURM_STEP_TASKS_PER_NODE", "3,2"},
            {"SLURM_PROCID", std::to_string(rank)},
            {"SLURM_LOCALID", std::to_string(rank < 3 ? rank : rank - 3)},
            {"SLURMD_NODENAME", rank < 3 ? "n1" : "n2"},
            // Ignored under Slurm.
            {"TF_CONFIG", R"({"cluster": {"ps": ["h1:1"], "worker": ["h3:1"]}})"}};
  }
};

TEST_F(SlurmClusterConfigTest, TheFirstRanksAreThePsAndTheRestTheWorkers) {
  const char* kCluster =
      R"({"cluster":{"ps":["n1:7000","n1:7001"],"worker":["n1:7002","n2:7000","n2:7001"]}})";
  const char* kTasks[] = {"ps:0", "ps:1", "worker:0", "worker:1", "worker:2"};
  const std::optional<int> kNodeWorkerIndex[] = {std::nullopt, std::nullopt, 0, 0, 1};
  for (int rank = 0; rank < 5; ++rank) {
    SCOPED_TRACE(rank);
    absl::StatusOr<ClusterConfig> config =
        ResolveClusterConfig(SlurmSource(2), TaskEnvironment(rank));
    ASSERT_TRUE(config.ok()) << config.status();
    EXPECT_EQ(config->cluster.ToJson(std::nullopt, -1), kCluster);
    EXPECT_EQ(TaskName(config->task), kTasks[rank]);
    EXPECT_EQ(config->node_worker_index, kNodeWorkerIndex[rank]);
  }
  absl::StatusOr<ClusterConfig> config = ResolveClusterConfig(SlurmSource(2), TaskEnvironment(3));
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->origin,
            "Slurm rank 3 of 5 on n2, local task 0; SLURM_STEP_NODELIST=n[1-2], "
            "SLURM_STEP_TASKS_PER_NODE=3,2, --slurm_num_ps=2, --slurm_base_port=7000");

  // psctl, in the batch script or outside any step, loads the same cluster.
  absl::StatusOr<ClusterSpec> cluster = LoadClusterSpec(
      SlurmSource(2), {{"SLURM_JOB_NODELIST", "n[1-2]"}, {"SLURM_TASKS_PER_NODE", "3,2"}});
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  EXPECT_EQ(cluster->ToJson(std::nullopt, -1), kCluster);
  EXPECT_FALSE(cluster->task().has_value());
}

TEST_F(SlurmClusterConfigTest, TheTaskFlagOverridesTheRank) {
  ClusterSource source = SlurmSource(1);
  source.task_flag = "worker:3";
  absl::StatusOr<ClusterConfig> config = ResolveClusterConfig(source, TaskEnvironment(0));
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(TaskName(config->task), "worker:3");
  EXPECT_EQ(config->cluster.Address(config->task), "n2:7001");
  EXPECT_FALSE(config->node_worker_index.has_value());
}

TEST_F(SlurmClusterConfigTest, ErrorsNameTheFlagOrVariableAndTheFix) {
  Environment environment = TaskEnvironment(0);
  environment.erase("SLURM_PROCID");
  absl::StatusOr<ClusterConfig> config = ResolveClusterConfig(SlurmSource(1), environment);
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(config.status().message().find("SLURM_PROCID is unset"), absl::string_view::npos);
  EXPECT_NE(config.status().message().find("start each task with srun"), absl::string_view::npos);

  for (int num_ps : {0, 5, 6}) {
    config = ResolveClusterConfig(SlurmSource(num_ps), TaskEnvironment(0));
    ASSERT_FALSE(config.ok());
    EXPECT_NE(config.status().message().find(
                  absl::StrCat("--slurm_num_ps=", num_ps,
                               " must be at least 1 and leave a worker among the 5 tasks of "
                               "SLURM_STEP_NODELIST=n[1-2]")),
              absl::string_view::npos)
        << config.status();
  }

  ClusterSource both = SlurmSource(1);
  both.cluster_spec_path = "cluster.json";
  config = ResolveClusterConfig(both, TaskEnvironment(0));
  ASSERT_FALSE(config.ok());
  EXPECT_NE(config.status().message().find("both name a cluster; give one of them"),
            absl::string_view::npos);

  config = ResolveClusterConfig(SlurmSource(1), {});
  ASSERT_FALSE(config.ok());
  EXPECT_NE(config.status().message().find("inside a Slurm job"), absl::string_view::npos);

  // A node name that is no host name: the ClusterSpec's own check, after the variables read.
  config = ResolveClusterConfig(
      SlurmSource(1), {{"SLURM_JOB_NODELIST", "n_[1-2]"}, {"SLURM_TASKS_PER_NODE", "1(x2)"}});
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().message().rfind(
                "SLURM_JOB_NODELIST=n_[1-2], SLURM_TASKS_PER_NODE=1(x2): field \"ps[0]\"", 0),
            0u)
      << config.status();
}

TEST(ClusterSpecFromFileTest, AnUnreadableFileNamesThePathAndTheFlag) {
  FaultInjectingFileSystem fs;
  const std::string path = ::testing::TempDir() + "/hidden_cluster.json";
  ASSERT_TRUE(fs.WriteFileAtomically(path, R"({"ps": ["h1:1"], "worker": ["h2:1"]})").ok());
  ASSERT_TRUE(ClusterSpec::FromFile(path, &fs).ok());
  fs.HideFiles("hidden_cluster.json");
  absl::StatusOr<ClusterSpec> spec = ClusterSpec::FromFile(path, &fs);
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(spec.status().message().find(path), absl::string_view::npos) << spec.status();
  EXPECT_NE(spec.status().message().find("--cluster_spec"), absl::string_view::npos)
      << spec.status();
}

TEST(ClusterSpecExamplesTest, EveryExampleInConfigLoads) {
  for (const char* path : {"config/clusters/local.json", "config/clusters/multihost.json"}) {
    absl::StatusOr<ClusterSpec> spec = ClusterSpec::FromFile(path);
    ASSERT_TRUE(spec.ok()) << spec.status();
    EXPECT_GE(spec->NumTasks("ps"), 1);
    EXPECT_GE(spec->NumTasks("worker"), 1);
  }
  absl::StatusOr<ClusterSpec> local = ClusterSpec::FromFile("config/clusters/local.json");
  ASSERT_TRUE(local.ok());
  EXPECT_EQ(local->NumTasks("ps"), 2);
  EXPECT_EQ(local->NumTasks("worker"), 2);
}

}  // namespace
}  // namespace ps
