#include "worker/program_runner.h"

#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <utility>

#include <google/protobuf/util/json_util.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/process/subprocess.h"
#include "common/security/auth_token.h"
#include "glog/logging.h"

namespace ps {
namespace {

// The last `lines` lines of `text`.
std::string Tail(const std::string& text, int lines) {
  std::vector<absl::string_view> all = absl::StrSplit(text, '\n', absl::SkipEmpty());
  const size_t from = all.size() > static_cast<size_t>(lines) ? all.size() - lines : 0;
  return absl::StrJoin(all.begin() + from, all.end(), "\n");
}

// Reads the complete lines a program appended to its progress file since `offset`.
class ProgressReader {
 public:
  explicit ProgressReader(std::string path) : path_(std::move(path)) {}

  // Each new complete line, parsed into a JobProgress; bad lines are logged and skipped.
  std::vector<JobProgress> Read() {
    std::vector<JobProgress> reports;
    std::ifstream in(path_, std::ios::binary);
    if (!in) return reports;
    in.seekg(offset_);
    std::string line;
    while (std::getline(in, line)) {
      if (in.eof()) break;  // Not yet complete: read again next time.
      offset_ += static_cast<std::streamoff>(line.size()) + 1;
      JobProgress progress;
      google::protobuf::util::JsonParseOptions options;
      options.ignore_unknown_fields = false;
      if (!google::protobuf::util::JsonStringToMessage(line, &progress, options).ok()) {
        LOG(WARNING) << "the program's progress line is not a JobProgress (fields of "
                        "proto/worker_service.proto), skipped: "
                     << line.substr(0, 200);
        continue;
      }
      reports.push_back(std::move(progress));
    }
    return reports;
  }

 private:
  const std::string path_;
  std::streamoff offset_ = 0;
};

// A fresh folder for one run of the program, removed with this.
class RunFolder {
 public:
  static absl::StatusOr<RunFolder> Make() {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "ps_program_XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) {
      return absl::InternalError(absl::StrCat("cannot make a folder for the program from ",
                                              pattern, ": ", strerror(errno)));
    }
    return RunFolder(pattern);
  }
  RunFolder(RunFolder&& other) noexcept : path_(std::exchange(other.path_, "")) {}
  ~RunFolder() {
    std::error_code ignored;
    if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
  }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  explicit RunFolder(std::string path) : path_(std::move(path)) {}
  std::string path_;
};

}  // namespace

absl::StatusOr<std::string> FindProgram(const std::string& name, const std::string& path) {
  if (name.find('/') != std::string::npos) {
    if (access(name.c_str(), X_OK) == 0) return name;
    return absl::NotFoundError(absl::StrCat("program.argv[0] ", name, " is not an executable "
                                            "file on this worker's host"));
  }
  for (absl::string_view dir : absl::StrSplit(path, ':', absl::SkipEmpty())) {
    const std::string candidate = absl::StrCat(dir, "/", name);
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return absl::NotFoundError(absl::StrCat("program.argv[0] ", name, " is on no folder of "
                                          "ps_worker's PATH (", path, "); give its path"));
}

std::vector<std::string> ProgramEnvironment(const ProgramContext& context,
                                            const std::string& token_file,
                                            const std::string& progress_file) {
  std::string job;
  google::protobuf::util::JsonPrintOptions print;
  print.preserve_proto_field_names = true;
  (void)google::protobuf::util::MessageToJsonString(context.spec, &job, print);
  const TransportSecurity& tls = context.ps.security;
  // TensorFlow's TF_CONFIG, for programs that read their task from it: the ps tasks and this
  // worker's index.
  std::vector<std::string> ps_tasks;
  for (const std::string& address : context.ps.ps_addresses) {
    ps_tasks.push_back(absl::StrCat("\"", address, "\""));
  }
  const std::string tf_config =
      absl::StrCat("{\"cluster\":{\"ps\":[", absl::StrJoin(ps_tasks, ","),
                   "]},\"task\":{\"type\":\"worker\",\"index\":", context.worker, "}}");
  return {
      absl::StrCat("TF_CONFIG=", tf_config),
      absl::StrCat("PS_JOB=", job),
      absl::StrCat("PS_WORKER=", context.worker),
      absl::StrCat("PS_NUM_WORKERS=", context.num_workers),
      absl::StrCat("PS_INCARNATION=", context.incarnation),
      absl::StrCat("PS_FIRST_STEP=", context.first_step),
      absl::StrCat("PS_PS_ADDRESSES=", absl::StrJoin(context.ps.ps_addresses, ",")),
      absl::StrCat("PS_TLS_CA=", tls.ca_file),
      absl::StrCat("PS_TLS_CERT=", tls.cert_file),
      absl::StrCat("PS_TLS_KEY=", tls.key_file),
      absl::StrCat("PS_TOKEN_FILE=", token_file),
      absl::StrCat("PS_PROGRESS_FILE=", progress_file),
  };
}

absl::Status RunProgram(const ProgramContext& context) {
  const char* path = getenv("PATH");
  absl::StatusOr<std::string> program =
      FindProgram(context.spec.program().argv(0), path == nullptr ? "/usr/bin:/bin" : path);
  if (!program.ok()) return program.status();
  absl::StatusOr<RunFolder> folder = RunFolder::Make();
  if (!folder.ok()) return folder.status();
  const std::string token_file = context.ps.token.empty() ? "" : folder->File("token");
  if (!token_file.empty()) {
    absl::Status written = WriteTokenFile(token_file, context.ps.token);
    if (!written.ok()) return written;
  }
  const std::string progress_file = folder->File("progress.jsonl");
  std::vector<std::string> argv(context.spec.program().argv().begin(),
                                context.spec.program().argv().end());
  argv[0] = *program;
  absl::StatusOr<Subprocess> child =
      Subprocess::Start(argv, folder->File("output.log"),
                        ProgramEnvironment(context, token_file, progress_file));
  if (!child.ok()) return child.status();
  LOG(INFO) << "job " << context.spec.job_id() << ": started " << absl::StrJoin(argv, " ")
            << " as process " << child->pid();
  ProgressReader progress(progress_file);
  const absl::Time start = context.clock->Now();
  // As the built-in trainer's, every report carries the latest evaluations, whichever report
  // of the program made them.
  EvalResult eval, validation;
  auto relay = [&] {
    for (JobProgress& report : progress.Read()) {
      report.set_job_id(context.spec.job_id());
      report.set_worker(context.worker);
      report.set_state(JobProgress::RUNNING);
      if (report.elapsed_seconds() == 0) {
        report.set_elapsed_seconds(absl::ToDoubleSeconds(context.clock->Now() - start));
      }
      if (report.has_eval()) eval = report.eval();
      if (report.has_validation()) validation = report.validation();
      if (eval.step() > 0 || eval.examples() > 0) *report.mutable_eval() = eval;
      if (validation.step() > 0 || validation.examples() > 0) {
        *report.mutable_validation() = validation;
      }
      context.report(report);
    }
  };
  std::optional<absl::Time> terminated;
  std::optional<int> exit;
  while (!(exit = child->Wait(absl::Milliseconds(100))).has_value()) {
    relay();
    if (context.stop != nullptr && *context.stop && !terminated.has_value()) {
      child->Signal(SIGTERM);
      terminated = context.clock->Now();
    }
    if (terminated.has_value() && context.clock->Now() - *terminated > context.stop_grace) {
      child->Signal(SIGKILL);
    }
  }
  relay();
  if (terminated.has_value()) return absl::CancelledError("the job was stopped");
  if (*exit == 0) return absl::OkStatus();
  const bool signal = *exit > 128;
  const std::string message = absl::StrCat(
      "the program (", absl::StrJoin(argv, " "), ") ",
      signal ? absl::StrCat("was killed by signal ", *exit - 128)
             : absl::StrCat("exited with status ", *exit),
      "; its last output:\n", Tail(child->Output(), 15));
  return signal ? absl::UnavailableError(message) : absl::AbortedError(message);
}

}  // namespace ps
