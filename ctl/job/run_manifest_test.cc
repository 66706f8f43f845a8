#include "ctl/job/run_manifest.h"

#include <set>
#include <string>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>
#include <google/protobuf/reflection.h>
#include <gtest/gtest.h>

#include "absl/time/time.h"
#include "common/process/build_info.h"
#include "common/job/job_spec.h"

namespace ps {
namespace {

using google::protobuf::FieldDescriptor;

JobSpec Parse(const std::string& json) {
  absl::StatusOr<JobSpec> spec = ParseJobSpecJson(json, "test");
  EXPECT_TRUE(spec.ok()) << spec.status();
  return spec.ok() ? *spec : JobSpec();
}

TEST(JobSpecHashTest, DoesNotDependOnKeyOrderOrSpacing) {
  const std::string a = JobSpecHash(Parse(
      R"({"job_id": "j", "batch_size": 32, "model": {"kind": "MLP", "hidden_sizes": [8, 4]},
          "consistency": {"mode": "ASYNC", "max_staleness": 3}})"));
  const std::string b = JobSpecHash(Parse(
      R"({"consistency":{"max_staleness":3,"mode":"ASYNC"},"model":{"hidden_sizes":[8,4],
          "kind":"MLP"},"batch_size":32,"job_id":"j"})"));
  EXPECT_EQ(a, b);
  EXPECT_EQ(a.rfind("sha256:", 0), 0u);
  EXPECT_EQ(a.size(), 7u + 64u);
}

TEST(JobSpecHashTest, IgnoresTheRunsNameAndOwnerOnly) {
  JobSpec spec = Parse(R"({"job_id": "j", "batch_size": 32})");
  const std::string base = JobSpecHash(spec);
  spec.set_run_id("run-2");
  spec.set_owner("alice");
  EXPECT_EQ(JobSpecHash(spec), base);
  spec.set_job_id("k");
  EXPECT_NE(JobSpecHash(spec), base);
}

TEST(SettingsHashTest, IgnoresTheJobsIdButNoSetting) {
  JobSpec spec = Parse(R"({"job_id": "sweep-1-20261123", "batch_size": 32})");
  const std::string base = SettingsHash(spec);
  EXPECT_NE(base, JobSpecHash(spec));
  spec.set_job_id("sweep-1-20261124");
  spec.set_run_id("another");
  EXPECT_EQ(SettingsHash(spec), base);
  spec.set_batch_size(33);
  EXPECT_NE(SettingsHash(spec), base);
}

// Sets `field` of `message` to a value other than its default (for a message field, one of the
// nested message's fields, recursively): any such change must change the hash.
void SetNonDefault(google::protobuf::Message* message, const FieldDescriptor* field) {
  const google::protobuf::Reflection* reflection = message->GetReflection();
  if (field->is_repeated()) {
    switch (field->cpp_type()) {
      case FieldDescriptor::CPPTYPE_INT32: reflection->AddInt32(message, field, 5); return;
      case FieldDescriptor::CPPTYPE_INT64: reflection->AddInt64(message, field, 5); return;
      case FieldDescriptor::CPPTYPE_STRING: reflection->AddString(message, field, "x"); return;
      case FieldDescriptor::CPPTYPE_MESSAGE: reflection->AddMessage(message, field); return;
      default: FAIL() << "no value for repeated " << field->full_name();
    }
  }
  switch (field->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32: reflection->SetInt32(message, field, 5); return;
    case FieldDescriptor::CPPTYPE_INT64: reflection->SetInt64(message, field, 5); return;
    case FieldDescriptor::CPPTYPE_UINT32: reflection->SetUInt32(message, field, 5); return;
    case FieldDescriptor::CPPTYPE_UINT64: reflection->SetUInt64(message, field, 5); return;
    case FieldDescriptor::CPPTYPE_FLOAT: reflection->SetFloat(message, field, 0.5f); return;
    case FieldDescriptor::CPPTYPE_DOUBLE: reflection->SetDouble(message, field, 0.5); return;
    case FieldDescriptor::CPPTYPE_BOOL: reflection->SetBool(message, field, true); return;
    case FieldDescriptor::CPPTYPE_STRING: reflection->SetString(message, field, "x"); return;
    case FieldDescriptor::CPPTYPE_ENUM:
      reflection->SetEnumValue(message, field, field->enum_type()->value(1)->number());
      return;
    case FieldDescriptor::CPPTYPE_MESSAGE: {
      google::protobuf::Message* nested = reflection->MutableMessage(message, field);
      SetNonDefault(nested, nested->GetDescriptor()->field(0));
      return;
    }
  }
}

// Every field of JobSpec, and every field of the messages it holds, one at a time.
TEST(JobSpecHashTest, ChangesWithEveryOtherField) {
  const JobSpec base;
  const std::string base_hash = JobSpecHash(base);
  std::set<std::string> hashes = {base_hash};
  int fields = 0;
  const google::protobuf::Descriptor* descriptor = JobSpec::descriptor();
  for (int i = 0; i < descriptor->field_count(); ++i) {
    const FieldDescriptor* field = descriptor->field(i);
    if (field->name() == "run_id" || field->name() == "owner") continue;
    std::vector<JobSpec> changed;
    if (field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE && !field->is_repeated()) {
      const google::protobuf::Descriptor* nested = field->message_type();
      for (int j = 0; j < nested->field_count(); ++j) {
        JobSpec spec = base;
        google::protobuf::Message* message = spec.GetReflection()->MutableMessage(&spec, field);
        SetNonDefault(message, nested->field(j));
        changed.push_back(spec);
      }
    } else {
      JobSpec spec = base;
      SetNonDefault(&spec, field);
      changed.push_back(spec);
    }
    for (const JobSpec& spec : changed) {
      ++fields;
      const std::string hash = JobSpecHash(spec);
      EXPECT_NE(hash, base_hash) << field->name() << ": " << spec.ShortDebugString();
      hashes.insert(hash);
    }
  }
  EXPECT_GT(fields, 60);
  // Each change gives a hash of its own (a field set to 5 is not another set to 5).
  EXPECT_EQ(hashes.size(), static_cast<size_t>(fields) + 1);
}

TEST(ManifestJsonTest, RecordsTheRunItsTasksMachinesAndFinalFigures) {
  RunManifest run;
  run.spec = Parse(R"({"job_id": "j", "batch_size": 32})");
  run.spec.set_run_id("run-1");
  run.cluster = {{"ps", {"a:1"}}, {"worker", {"a:2", "b:3"}}};
  TaskInfo ps0, worker0;
  ps0.set_version("v");
  ps0.mutable_machine()->set_hostname("a");
  ps0.mutable_machine()->set_cores(2);
  worker0 = ps0;
  worker0.set_device("cpu");
  run.tasks = {{"ps:0", "a:1", ps0},
               {"worker:0", "a:2", worker0},
               {"worker:1", "b:3", absl::UnavailableError("worker:1 (b:3) is down")}};
  run.started = absl::FromUnixSeconds(1795000000);
  run.ended = run.started + absl::Milliseconds(61500);
  const nlohmann::json summary = {{"state", "DONE"}, {"steps", 10}, {"final_eval_accuracy", 0.9},
                                  {"dropped_by_reason", nlohmann::json::object()}};

  const nlohmann::json manifest = ManifestJson(run, summary);
  EXPECT_EQ(manifest["job_id"], "j");
  EXPECT_EQ(manifest["run_id"], "run-1");
  EXPECT_EQ(manifest["job_hash"], JobSpecHash(run.spec));
  EXPECT_EQ(manifest["settings_hash"], SettingsHash(run.spec));
  EXPECT_EQ(manifest["software"]["version"], VersionString());
  EXPECT_EQ(manifest["cluster"], run.cluster);
  ASSERT_EQ(manifest["tasks"].size(), 3u);
  EXPECT_EQ(manifest["tasks"][1]["device"], "cpu");
  EXPECT_EQ(manifest["tasks"][1]["host"], "a");
  EXPECT_EQ(manifest["tasks"][2]["error"], "worker:1 (b:3) is down");
  ASSERT_EQ(manifest["machines"].size(), 1u);  // ps:0 and worker:0 share host a.
  EXPECT_EQ(manifest["machines"][0]["hostname"], "a");
  EXPECT_EQ(manifest["machines"][0]["cores"], 2);
  EXPECT_EQ(manifest["started_at"], "2026-11-18T11:06:40.000Z");
  EXPECT_EQ(manifest["ended_at"], "2026-11-18T11:07:41.500Z");
  EXPECT_EQ(manifest["final"],
            (nlohmann::json{{"state", "DONE"}, {"steps", 10}, {"final_eval_accuracy", 0.9}}));
}

}  // namespace
}  // namespace ps
