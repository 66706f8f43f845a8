#include <filesystem>
#include <fstream>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/substitute.h"
#include "ctl/experiment/sweep.h"
#include "ctl/experiment/sweep_table.h"

namespace ps {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr char kBaseJob[] = R"({
  "job_id": "ignored",
  "model": {"kind": "SOFTMAX_REGRESSION"},
  "data": {"synthetic": {"kind": "GAUSSIAN_MIXTURE", "num_examples": 1000, "feature_dim": 4,
                         "num_classes": 3}},
  "learning_rate": {"base": 0.1},
  "consistency": {"mode": "SYNC"},
  "batch_size": 8, "steps": 10, "seed": 7})";

// A sweep named "unit" from `fields` (JSON members after the base job).
absl::StatusOr<Sweep> Parse(const std::string& fields) {
  return ParseSweep(absl::StrCat(R"({"name": "unit", "base_job": )", kBaseJob, fields, "}"),
                    "unit.json");
}

std::vector<std::string> Ids(const std::vector<SweepPoint>& points) {
  std::vector<std::string> ids;
  for (const SweepPoint& point : points) ids.push_back(point.id);
  return ids;
}

TEST(SweepTest, AxesMakeAProductWithTheFirstAxisOutermost) {
  absl::StatusOr<Sweep> sweep =
      Parse(R"(, "axes": {"workers": [1, 2], "consistency.mode": ["SYNC", "ASYNC"]})");
  ASSERT_TRUE(sweep.ok()) << sweep.status();
  absl::StatusOr<std::vector<SweepPoint>> points = ExpandSweep(*sweep, 3, 2);
  ASSERT_TRUE(points.ok()) << points.status();
  EXPECT_THAT(Ids(*points),
              ElementsAre("workers=1,consistency.mode=SYNC", "workers=1,consistency.mode=ASYNC",
                          "workers=2,consistency.mode=SYNC", "workers=2,consistency.mode=ASYNC"));
  for (int i = 0; i < 4; ++i) {
    const SweepPoint& point = (*points)[i];
    EXPECT_EQ(point.index, i);
    EXPECT_EQ(point.num_workers, 1 + i / 2);
    EXPECT_EQ(point.spec.consistency().mode(),
              i % 2 == 0 ? ConsistencyConfig::SYNC : ConsistencyConfig::ASYNC);
    EXPECT_EQ(point.spec.job_id(), absl::StrCat("unit-", i + 1));
    EXPECT_EQ(point.spec.seed(), 7u);
    EXPECT_EQ(point.dir_name, point.id);
  }
}

TEST(SweepTest, VariantsGoTogetherAndRepeatsChangeTheSeed) {
  absl::StatusOr<Sweep> sweep = Parse(R"(,
      "variants": [{"consistency.mode": "SYNC"},
                   {"consistency.mode": "SSP", "consistency.ssp_bound": 4}],
      "axes": {"learningRate.base": [0.5]},
      "repeats": 2)");
  ASSERT_TRUE(sweep.ok()) << sweep.status();
  EXPECT_THAT(SettingPaths(*sweep),
              ElementsAre("consistency.mode", "consistency.ssp_bound", "learningRate.base"));
  absl::StatusOr<std::vector<SweepPoint>> points = ExpandSweep(*sweep, 2, 2);
  ASSERT_TRUE(points.ok()) << points.status();
  EXPECT_THAT(
      Ids(*points),
      ElementsAre("consistency.mode=SYNC,learningRate.base=0.5,repeat=0",
                  "consistency.mode=SYNC,learningRate.base=0.5,repeat=1",
                  "consistency.mode=SSP,consistency.ssp_bound=4,learningRate.base=0.5,repeat=0",
                  "consistency.mode=SSP,consistency.ssp_bound=4,learningRate.base=0.5,repeat=1"));
  EXPECT_EQ((*points)[2].spec.consistency().ssp_bound(), 4);
  EXPECT_EQ((*points)[0].spec.consistency().ssp_bound(), 0);
  EXPECT_FLOAT_EQ((*points)[3].spec.learning_rate().base(), 0.5f);
  EXPECT_EQ((*points)[0].spec.seed(), 7u);
  EXPECT_EQ((*points)[1].spec.seed(), 8u);
  EXPECT_EQ((*points)[3].repeat, 1);
  // What the settings do not touch stays as in the base job.
  EXPECT_EQ((*points)[3].spec.steps(), 10);
  EXPECT_EQ((*points)[3].spec.data().synthetic().num_classes(), 3);
}

TEST(SweepTest, ObjectValuesReplaceAMessageAndNameASafeDirectory) {
  absl::StatusOr<Sweep> sweep = Parse(R"(, "axes": {"stragglers": [
      {}, {"distribution": "FIXED", "workers": [1], "factor": 3}]})");
  ASSERT_TRUE(sweep.ok()) << sweep.status();
  absl::StatusOr<std::vector<SweepPoint>> points = ExpandSweep(*sweep, 2, 2);
  ASSERT_TRUE(points.ok()) << points.status();
  ASSERT_EQ(points->size(), 2u);
  EXPECT_EQ((*points)[0].spec.stragglers().distribution(), StragglerSpec::NONE);
  EXPECT_EQ((*points)[1].spec.stragglers().distribution(), StragglerSpec::FIXED);
  EXPECT_THAT((*points)[1].spec.stragglers().workers(), ElementsAre(1));
  EXPECT_EQ((*points)[1].id, R"(stragglers={"distribution":"FIXED","workers":[1],"factor":3})");
  EXPECT_EQ((*points)[1].dir_name, "stragglers=__distribution___FIXED_,_workers___1_,_factor__3_");
}

// Long ids (many settings) keep a directory name a file system takes: at most 160 bytes, the
// start of the id and a hash of the whole, distinct for points that differ only at their end.
TEST(SweepTest, LongIdsGetShortDistinctDirectoryNames) {
  absl::StatusOr<Sweep> sweep = Parse(R"(, "variants": [
      {"learning_rate.kind": "STEP_DECAY", "learning_rate.decay_steps": 1200,
       "learning_rate.decay_factor": 0.5, "optimizer.kind": "MOMENTUM",
       "optimizer.momentum": 0.9, "stragglers.distribution": "EXPONENTIAL",
       "stragglers.mean_delay_ms": 40}],
      "axes": {"stragglers.workers": [[0], [1]]}, "repeats": 2)");
  ASSERT_TRUE(sweep.ok()) << sweep.status();
  absl::StatusOr<std::vector<SweepPoint>> points = ExpandSweep(*sweep, 2, 2);
  ASSERT_TRUE(points.ok()) << points.status();
  ASSERT_EQ(points->size(), 4u);
  std::set<std::string> names;
  for (const SweepPoint& point : *points) {
    EXPECT_GT(point.id.size(), 160u);
    EXPECT_LE(point.dir_name.size(), 160u) << point.dir_name;
    EXPECT_EQ(point.dir_name.substr(0, 40), point.id.substr(0, 40));
    names.insert(point.dir_name);
  }
  EXPECT_EQ(names.size(), 4u);
  // The same on every expansion: a sweep run again resumes into the same directories.
  absl::StatusOr<std::vector<SweepPoint>> again = ExpandSweep(*sweep, 2, 2);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)[3].dir_name, (*points)[3].dir_name);
}

// "ps", like "workers", is a number of tasks, in the variants or on an axis; the top-level
// "ps" (passed as the default) is every other point's.
TEST(SweepTest, PsSetsThePointsNumberOfPsTasks) {
  absl::StatusOr<Sweep> sweep = Parse(R"(, "ps": 3,
      "variants": [{"consistency.mode": "SYNC", "ps": 1}, {"consistency.mode": "SYNC", "ps": 2},
                   {"consistency.mode": "ASYNC"}],
      "axes": {"workers": [2, 4]})");
  ASSERT_TRUE(sweep.ok()) << sweep.status();
  EXPECT_EQ(sweep->num_ps, 3);
  EXPECT_THAT(SettingPaths(*sweep), ElementsAre("consistency.mode", "ps", "workers"));
  absl::StatusOr<std::vector<SweepPoint>> points = ExpandSweep(*sweep, 8, sweep->num_ps);
  ASSERT_TRUE(points.ok()) << points.status();
  EXPECT_THAT(
      Ids(*points),
      ElementsAre("consistency.mode=SYNC,ps=1,workers=2", "consistency.mode=SYNC,ps=1,workers=4",
                  "consistency.mode=SYNC,ps=2,workers=2", "consistency.mode=SYNC,ps=2,workers=4",
                  "consistency.mode=ASYNC,workers=2", "consistency.mode=ASYNC,workers=4"));
  std::vector<int> ps, workers;
  for (const SweepPoint& point : *points) {
    ps.push_back(point.num_ps);
    workers.push_back(point.num_workers);
  }
  EXPECT_THAT(ps, ElementsAre(1, 1, 2, 2, 3, 3));
  EXPECT_THAT(workers, ElementsAre(2, 4, 2, 4, 2, 4));

  sweep = Parse(R"(, "axes": {"ps": [1, 2], "consistency.mode": ["SYNC"]})");
  ASSERT_TRUE(sweep.ok()) << sweep.status();
  points = ExpandSweep(*sweep, 2, 5);
  ASSERT_TRUE(points.ok()) << points.status();
  ASSERT_EQ(points->size(), 2u);
  EXPECT_EQ((*points)[0].num_ps, 1);
  EXPECT_EQ((*points)[1].num_ps, 2);
  EXPECT_EQ((*points)[1].id, "ps=2,consistency.mode=SYNC");

  // Without a setting, every point has the default.
  sweep = Parse(R"(, "axes": {"workers": [2]})");
  ASSERT_TRUE(sweep.ok()) << sweep.status();
  points = ExpandSweep(*sweep, 2, 5);
  ASSERT_TRUE(points.ok()) << points.status();
  EXPECT_EQ((*points)[0].num_ps, 5);
}

TEST(SweepTest, ASweepWithoutSettingsIsOnePoint) {
  absl::StatusOr<Sweep> sweep = Parse("");
  ASSERT_TRUE(sweep.ok()) << sweep.status();
  absl::StatusOr<std::vector<SweepPoint>> points = ExpandSweep(*sweep, 2, 2);
  ASSERT_TRUE(points.ok()) << points.status();
  EXPECT_THAT(Ids(*points), ElementsAre("base"));
}

// "select" names a setting of the sweep (not the seed), whose value the report selects.
TEST(SweepTest, SelectNamesOneOfTheSweepsSettings) {
  absl::StatusOr<Sweep> sweep =
      Parse(R"(, "axes": {"learning_rate.base": [0.1, 0.2], "consistency.mode": ["SYNC"]},
               "select": "learning_rate.base")");
  ASSERT_TRUE(sweep.ok()) << sweep.status();
  EXPECT_EQ(sweep->select, "learning_rate.base");
  for (const char* bad : {R"("steps")", R"("seed")", "3"}) {
    sweep = Parse(absl::StrCat(R"(, "axes": {"learning_rate.base": [0.1], "seed": [1, 2]},
                                  "select": )",
                               bad));
    ASSERT_FALSE(sweep.ok()) << bad;
    EXPECT_THAT(sweep.status().message(),
                HasSubstr("select: must name one of the sweep's settings other than seed"));
  }
}

TEST(SweepTest, UnknownFieldPathsAreErrorsNamingTheFileAndTheAxis) {
  absl::StatusOr<Sweep> sweep = Parse(R"(, "axes": {"consistency.mod": ["SYNC"]})");
  ASSERT_FALSE(sweep.ok());
  EXPECT_EQ(sweep.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(
      sweep.status().message(),
      HasSubstr(R"(unit.json: axes."consistency.mod": JobSpec.consistency has no field "mod")"));
  EXPECT_THAT(sweep.status().message(), HasSubstr("mode, replicas_to_aggregate"));

  sweep = Parse(R"(, "variants": [{"steps.count": 3}])");
  ASSERT_FALSE(sweep.ok());
  EXPECT_THAT(
      sweep.status().message(),
      HasSubstr(R"(unit.json: variants[0]: "steps.count": JobSpec.steps is not a message)"));

  sweep = Parse(R"(, "axes": {"job_id": ["a", "b"]})");
  ASSERT_FALSE(sweep.ok());
  EXPECT_THAT(sweep.status().message(), HasSubstr("job_id is set by the sweep"));
}

TEST(SweepTest, ValuesThatDoNotFitAreErrorsNamingTheSetting) {
  absl::StatusOr<Sweep> sweep = Parse(R"(, "axes": {"consistency.mode": ["SYNC", "SYNK"]})");
  ASSERT_TRUE(sweep.ok()) << sweep.status();
  absl::StatusOr<std::vector<SweepPoint>> points = ExpandSweep(*sweep, 2, 2);
  ASSERT_FALSE(points.ok());
  EXPECT_THAT(
      points.status().message(),
      HasSubstr(R"(unit.json: setting "consistency.mode": SYNK does not fit consistency.mode)"));
}

TEST(SweepTest, PointsThatDoNotValidateNameThePoint) {
  absl::StatusOr<Sweep> sweep =
      Parse(R"(, "axes": {"workers": [4, 2], "consistency.replicas_to_aggregate": [3]})");
  ASSERT_TRUE(sweep.ok()) << sweep.status();
  absl::StatusOr<std::vector<SweepPoint>> points = ExpandSweep(*sweep, 2, 2);
  ASSERT_FALSE(points.ok());
  EXPECT_THAT(points.status().message(),
              HasSubstr("unit.json: point workers=2,consistency.replicas_to_aggregate=3: "
                        "consistency.replicas_to_aggregate is 3 but the cluster has 2 workers"));
}

TEST(SweepTest, MalformedSweepsAreErrors) {
  struct Case {
    std::string json;
    std::string message;
  };
  const std::string base = absl::StrCat(R"("base_job": )", kBaseJob);
  for (const Case& c : std::vector<Case>{
           {"[1]", "unit.json: not a JSON object"},
           {"{", "unit.json: not valid JSON"},
           {R"({"name": "x"})", "base_job: is required"},
           {absl::StrCat(R"({"name": "a/b", )", base, "}"), "name: must be"},
           {absl::StrCat(R"({"name": "x", "axis": {}, )", base, "}"), "axis: unknown field"},
           {absl::StrCat(R"({"name": "x", "repeats": 0, )", base, "}"), "repeats: must be"},
           {absl::StrCat(R"({"name": "x", "axes": {"workers": [0]}, )", base, "}"),
            "workers must be a whole number >= 1, got 0"},
           {absl::StrCat(R"({"name": "x", "axes": {"ps": [1, 0]}, )", base, "}"),
            "axes.\"ps\": ps must be a whole number >= 1, got 0"},
           {absl::StrCat(R"({"name": "x", "variants": [{"ps": "2"}], )", base, "}"),
            "variants[0]: ps must be a whole number >= 1, got \"2\""},
           {absl::StrCat(R"({"name": "x", "variants": [{"ps": 1}], "axes": {"ps": [2]}, )", base,
                         "}"),
            "axes.\"ps\": is set by the variants too"},
           {absl::StrCat(R"({"name": "x", "ps": 0, )", base, "}"), "ps: must be"},
           {absl::StrCat(R"({"name": "x", "axes": {"steps": []}, )", base, "}"),
            "must be a non-empty list"},
           {absl::StrCat(R"({"name": "x", "variants": [{"steps": 1}], "axes": {"steps": [2]}, )",
                         base, "}"),
            "is set by the variants too"},
           {R"({"name": "x", "base_job": "no/such/job.json"})", "no/such/job.json: cannot read"},
       }) {
    absl::StatusOr<Sweep> sweep = ParseSweep(c.json, "unit.json");
    EXPECT_FALSE(sweep.ok()) << c.json;
    EXPECT_THAT(sweep.status().message(), HasSubstr(c.message)) << c.json;
  }
  absl::StatusOr<Sweep> sweep = Parse(R"(, "variants": [{"steps": 1}, {"steps": 1}])");
  ASSERT_TRUE(sweep.ok()) << sweep.status();
  EXPECT_THAT(ExpandSweep(*sweep, 2, 2).status().message(),
              HasSubstr("two points have the id steps=1"));
}

// Every example sweep loads, and every point of it is a valid job.
TEST(SweepTest, EveryExampleSweepExpands) {
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator("config/sweeps")) {
    ++files;
    absl::StatusOr<Sweep> sweep = ReadSweepFile(entry.path().string());
    ASSERT_TRUE(sweep.ok()) << sweep.status();
    EXPECT_EQ(entry.path().stem().string(), sweep->name);
    absl::StatusOr<std::vector<SweepPoint>> points = ExpandSweep(*sweep, 2, 2);
    ASSERT_TRUE(points.ok()) << points.status();
    EXPECT_FALSE(points->empty());
    for (const SweepPoint& point : *points) {
      EXPECT_LE(point.dir_name.size(), 160u) << point.dir_name;  // With ".cluster": < 255.
    }
  }
  EXPECT_GE(files, 5);
}

class SweepTableTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = absl::StrCat(std::getenv("TEST_TMPDIR"), "/",
                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void Write(const std::string& path, const std::string& text) {
    std::filesystem::create_directories(std::filesystem::path(dir_ + "/" + path).parent_path());
    std::ofstream(dir_ + "/" + path) << text;
  }
  std::string Read(const std::string& path) {
    std::ifstream file(dir_ + "/" + path);
    std::stringstream text;
    text << file.rdbuf();
    return text.str();
  }
  std::string dir_;
};

TEST_F(SweepTableTest, TimeToTargetIsTheFirstEvaluationAtOrBelowIt) {
  Write("eval.csv",
        "time_s,step,loss,accuracy,examples\n0.5,10,0.9,0.5,100\n"
        "1.5,20,0.4,0.8,100\n2.5,30,0.3,0.9,100\n");
  EXPECT_EQ(TimeToTarget(dir_ + "/eval.csv", 0.4), 1.5);
  EXPECT_EQ(TimeToTarget(dir_ + "/eval.csv", 0.35), 2.5);
  EXPECT_EQ(TimeToTarget(dir_ + "/eval.csv", 0.1), std::nullopt);
  EXPECT_EQ(TimeToTarget(dir_ + "/missing.csv", 0.4), std::nullopt);
}

TEST_F(SweepTableTest, OneRowPerPointWithItsSettingsAndResults) {
  absl::StatusOr<Sweep> sweep = Parse(R"(, "axes": {"consistency.mode": ["SYNC", "ASYNC"]},
                                          "target_loss": 0.5)");
  ASSERT_TRUE(sweep.ok()) << sweep.status();
  absl::StatusOr<std::vector<SweepPoint>> points = ExpandSweep(*sweep, 2, 2);
  ASSERT_TRUE(points.ok()) << points.status();
  Write("consistency.mode=SYNC/summary.json",
        R"({"state": "DONE", "steps": 10, "wall_time_s": 1.25, "examples_per_second": 100,
            "final_train_loss": 0.5, "final_eval_loss": 0.25, "final_eval_accuracy": 0.75,
            "staleness_mean": 0, "staleness_max": 0, "dropped_gradients": 2,
            "bytes_sent_per_step": 2142490.25, "bytes_received_per_step": 4100})");
  Write("consistency.mode=SYNC/eval.csv",
        "time_s,step,loss,accuracy,examples\n0.75,5,0.5,0.6,10\n");
  ASSERT_TRUE(WriteSweepTable(dir_ + "/sweep.csv", *sweep, *points, dir_).ok());
  EXPECT_EQ(Read("sweep.csv"),
            "point,dir,consistency.mode,workers,ps,repeat,seed,state,steps,wall_time_s,"
            "time_per_step_s,examples_per_second,final_train_loss,final_eval_loss,"
            "final_eval_accuracy,final_validation_loss,final_validation_accuracy,staleness_mean,"
            "staleness_max,dropped_gradients,bytes_sent_per_step,bytes_received_per_step,"
            "time_to_target_s\n"
            "consistency.mode=SYNC,consistency.mode=SYNC,SYNC,2,2,0,7,DONE,10,1.25,0.125,100,0.5,"
            "0.25,0.75,,,0,0,2,2142490.25,4100,0.75\n"
            "consistency.mode=ASYNC,consistency.mode=ASYNC,ASYNC,2,2,0,7,PENDING,,,,,,,,,,,,,,,\n");
}

// A job with a validation split is judged on it: its validation figures are in the table, and
// its time to target comes from validation.csv (eval.csv holds only the final evaluation).
TEST_F(SweepTableTest, AJobWithAValidationSplitIsJudgedOnIt) {
  absl::StatusOr<Sweep> sweep = Parse(R"(, "axes": {"data.validation_fraction": [0.1]},
                                          "target_loss": 0.5)");
  ASSERT_TRUE(sweep.ok()) << sweep.status();
  absl::StatusOr<std::vector<SweepPoint>> points = ExpandSweep(*sweep, 2, 2);
  ASSERT_TRUE(points.ok()) << points.status();
  ASSERT_EQ(points->size(), 1u);
  const std::string point = (*points)[0].dir_name;
  Write(point + "/summary.json",
        R"({"state": "DONE", "final_eval_loss": 0.3, "final_eval_accuracy": 0.9,
            "final_validation_loss": 0.35, "final_validation_accuracy": 0.875})");
  Write(point + "/eval.csv", "time_s,step,loss,accuracy,examples\n9,50,0.3,0.9,10\n");
  Write(point + "/validation.csv",
        "time_s,step,loss,accuracy,examples\n2,10,0.7,0.6,10\n4,20,0.45,0.8,10\n");
  ASSERT_TRUE(WriteSweepTable(dir_ + "/sweep.csv", *sweep, *points, dir_).ok());
  const std::string table = Read("sweep.csv");
  EXPECT_NE(table.find(",0.3,0.9,0.35,0.875,"), std::string::npos) << table;
  EXPECT_EQ(table.substr(table.rfind(',') + 1), "4\n") << table;
}

// A job that ended before its first step has no time per step; one from before the byte
// counts has none of them either: empty cells, not zeros.
TEST_F(SweepTableTest, ColumnsASummaryCannotGiveAreEmpty) {
  absl::StatusOr<Sweep> sweep = Parse(R"(, "axes": {"ps": [1]})");
  ASSERT_TRUE(sweep.ok()) << sweep.status();
  absl::StatusOr<std::vector<SweepPoint>> points = ExpandSweep(*sweep, 2, 2);
  ASSERT_TRUE(points.ok()) << points.status();
  Write("ps=1/summary.json", R"({"state": "FAILED", "steps": 0, "wall_time_s": 0.5})");
  ASSERT_TRUE(WriteSweepTable(dir_ + "/sweep.csv", *sweep, *points, dir_).ok());
  EXPECT_EQ(Read("sweep.csv"),
            "point,dir,ps,workers,repeat,seed,state,steps,wall_time_s,time_per_step_s,"
            "examples_per_second,final_train_loss,final_eval_loss,final_eval_accuracy,"
            "final_validation_loss,final_validation_accuracy,staleness_mean,staleness_max,"
            "dropped_gradients,bytes_sent_per_step,bytes_received_per_step,time_to_target_s\n"
            "ps=1,ps=1,1,2,0,7,FAILED,0,0.5,,,,,,,,,,,,,\n");
}

// "workers" and "ps" columns hold every point's numbers, also where its variant sets neither.
TEST_F(SweepTableTest, TaskCountColumnsHoldEveryPointsNumbers) {
  absl::StatusOr<Sweep> sweep = Parse(R"(, "ps": 3,
      "variants": [{"consistency.mode": "SYNC", "ps": 1}, {"consistency.mode": "ASYNC"}])");
  ASSERT_TRUE(sweep.ok()) << sweep.status();
  absl::StatusOr<std::vector<SweepPoint>> points = ExpandSweep(*sweep, 4, sweep->num_ps);
  ASSERT_TRUE(points.ok()) << points.status();
  ASSERT_TRUE(WriteSweepTable(dir_ + "/sweep.csv", *sweep, *points, dir_).ok());
  EXPECT_THAT(Read("sweep.csv"),
              HasSubstr("point,dir,consistency.mode,ps,workers,repeat,seed,state,"));
  EXPECT_THAT(
      Read("sweep.csv"),
      HasSubstr("\n\"consistency.mode=SYNC,ps=1\",\"consistency.mode=SYNC,ps=1\",SYNC,1,4,0,7,"
                "PENDING,"));
  EXPECT_THAT(Read("sweep.csv"), HasSubstr("\nconsistency.mode=ASYNC,consistency.mode=ASYNC,ASYNC,"
                                           "3,4,0,7,PENDING,"));
}

TEST_F(SweepTableTest, FieldsWithCommasAreQuoted) {
  absl::StatusOr<Sweep> sweep =
      Parse(R"(, "axes": {"workers": [2], "model.hidden_sizes": [[4, 4]]})");
  ASSERT_TRUE(sweep.ok()) << sweep.status();
  absl::StatusOr<std::vector<SweepPoint>> points = ExpandSweep(*sweep, 2, 2);
  ASSERT_TRUE(points.ok()) << points.status();
  ASSERT_TRUE(WriteSweepTable(dir_ + "/sweep.csv", *sweep, *points, dir_).ok());
  EXPECT_THAT(Read("sweep.csv"),
              HasSubstr("\n\"workers=2,model.hidden_sizes=[4,4]\",\"workers=2,model.hidden_sizes="
                        "_4,4_\",2,\"[4,4]\",2,0,7,PENDING,"));
}

}  // namespace
}  // namespace ps
