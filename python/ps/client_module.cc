// ps._client: the Python binding (pybind11) of the C++ worker client that ps_worker uses
// (common/client: PsClient and WorkerSession), so that a Python or PyTorch program is a worker
// of a job with the same protocol: sharding, chunking, compression, sparse rows, TLS and tokens,
// leases, incarnations and run ids. No part of the protocol is written again in Python.
//
// Tensors cross as buffers: a pull writes into the caller's arrays and a push sends from them,
// without copies, where they are C-contiguous float32 (anything else is a TypeError or
// ValueError naming the variable and what it must be). The GIL is released while the calls
// wait on the network. Specs cross as serialized ParameterSpec bytes (make_parameter_spec).
//
// Errors: an absl::Status from the client becomes ps.Error (a RuntimeError) whose `code` is the
// status code's name ("FAILED_PRECONDITION") and whose message is the status's.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <google/protobuf/util/json_util.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/client/ps_client.h"
#include "common/client/worker_session.h"
#include "common/job/consistency_modes.h"
#include "common/job/job_schema.h"
#include "common/job/job_spec.h"
#include "proto/parameter.pb.h"

namespace py = pybind11;

namespace ps {
namespace {

// ps.Error, set up by the module.
py::object& ErrorType() {
  static py::object* const type = new py::object();
  return *type;
}

// Raises ps.Error for a failed status.
void ThrowIfError(const absl::Status& status) {
  if (status.ok()) return;
  py::object error = ErrorType()(std::string(status.message()));
  error.attr("code") = absl::StatusCodeToString(status.code());
  PyErr_SetObject(ErrorType().ptr(), error.ptr());
  throw py::error_already_set();
}

template <typename T>
T ValueOrThrow(absl::StatusOr<T> value) {
  ThrowIfError(value.status());
  return *std::move(value);
}

ParameterSpec ParseSpec(const py::bytes& bytes) {
  ParameterSpec spec;
  if (!spec.ParseFromString(std::string(bytes))) {
    throw py::value_error("not a serialized ParameterSpec: make one with make_parameter_spec");
  }
  return spec;
}

// The ParameterSpec of a job whose JobSpec is `job_json` (the JSON of config/jobs/*.json) and
// whose variables are `variables` (name, shape, initializer kind name, scale), for
// `num_workers` workers; checked as a ps checks it (ValidateParameterSpec).
// The initializer kind named `name` (for `what`'s message).
InitializerConfig::Kind InitializerKind(const std::string& what, const std::string& name) {
  InitializerConfig::Kind kind;
  if (!InitializerConfig::Kind_Parse(name, &kind)) {
    throw py::value_error(absl::StrCat(what, ": unknown initializer \"", name,
                                       "\"; one of ZEROS, UNIFORM, NORMAL, GLOROT_UNIFORM, "
                                       "CONSTANT"));
  }
  return kind;
}

// ... and `tables` (name, width, initializer kind name, scale): the job's sparse tables.
py::bytes MakeParameterSpec(
    const std::string& job_json,
    const std::vector<std::tuple<std::string, std::vector<int64_t>, std::string, float>>&
        variables,
    int num_workers,
    const std::vector<std::tuple<std::string, int64_t, std::string, float>>& tables,
    bool chief_initializes) {
  absl::StatusOr<JobSpec> job = ParseJobSpecJson(job_json, "the job");
  ThrowIfError(job.status());
  std::vector<VariableDef> defs;
  for (const auto& [name, shape, initializer, scale] : variables) {
    VariableDef& def = defs.emplace_back();
    def.set_name(name);
    for (int64_t dim : shape) def.add_shape(dim);
    def.mutable_initializer()->set_kind(InitializerKind("variable " + name, initializer));
    def.mutable_initializer()->set_scale(scale);
  }
  std::vector<SparseTableDef> table_defs;
  for (const auto& [name, width, initializer, scale] : tables) {
    SparseTableDef& def = table_defs.emplace_back();
    def.set_name(name);
    def.set_width(width);
    def.mutable_initializer()->set_kind(InitializerKind("sparse table " + name, initializer));
    def.mutable_initializer()->set_scale(scale);
  }
  ParameterSpec spec = ToParameterSpec(*job, defs, num_workers, table_defs);
  spec.set_chief_initializes(chief_initializes);
  ThrowIfError(ValidateParameterSpec(spec));
  return py::bytes(spec.SerializeAsString());
}

std::string SpecJson(const py::bytes& bytes) {
  std::string json;
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.preserve_proto_field_names = true;
  // A parsed message always prints.
  (void)google::protobuf::util::MessageToJsonString(ParseSpec(bytes), &json, options);
  return json;
}

// The elements of `variable` a pull or push moves: `array`'s buffer, which must be
// C-contiguous float32 of exactly `count` elements (any number when `count` < 0: sparse rows,
// which WorkerSession checks against their keys), `writable` for a pull.
absl::Span<float> FloatsOf(const std::string& variable, const py::handle& array, int64_t count,
                           bool writable, std::vector<py::buffer_info>* keep) {
  if (!PyObject_CheckBuffer(array.ptr())) {
    throw py::type_error(absl::StrCat(
        "variable ", variable, ": a ", std::string(py::str(array.get_type().attr("__name__"))),
        " is not an array; pass a NumPy array (or a CPU torch tensor through ps.torch)"));
  }
  py::buffer_info info = py::reinterpret_borrow<py::buffer>(array).request(writable);
  if (info.format != py::format_descriptor<float>::format() || info.itemsize != 4) {
    throw py::type_error(absl::StrCat("variable ", variable, ": dtype is not float32 (format '",
                                      info.format, "'); convert it with .astype(np.float32)"));
  }
  int64_t expected_stride = 4;
  for (int d = static_cast<int>(info.ndim) - 1; d >= 0; --d) {
    if (info.shape[d] > 1 && info.strides[d] != expected_stride) {
      throw py::value_error(absl::StrCat("variable ", variable,
                                         ": the array is not C-contiguous; pass "
                                         "np.ascontiguousarray(a) (or tensor.contiguous())"));
    }
    expected_stride *= info.shape[d];
  }
  if (count >= 0 && info.size != count) {
    throw py::value_error(absl::StrCat("variable ", variable, ": ", info.size,
                                       " elements, the job's variable has ", count,
                                       "; its shape is the job's (see Session.variables)"));
  }
  keep->push_back(std::move(info));
  return absl::MakeSpan(static_cast<float*>(keep->back().ptr),
                        static_cast<size_t>(keep->back().size));
}

// The keys of sparse table `table`'s rows: `array`'s buffer, C-contiguous uint64.
absl::Span<const uint64_t> KeysOf(const std::string& table, const py::handle& array,
                                  std::vector<py::buffer_info>* keep) {
  if (!PyObject_CheckBuffer(array.ptr())) {
    throw py::type_error(absl::StrCat("sparse table ", table, ": the keys are not an array"));
  }
  py::buffer_info info = py::reinterpret_borrow<py::buffer>(array).request();
  if (info.itemsize != 8 || (info.format != "Q" && info.format != "L") || info.ndim != 1 ||
      (info.size > 1 && info.strides[0] != 8)) {
    throw py::type_error(absl::StrCat("sparse table ", table, ": the keys must be a contiguous "
                                      "1-D uint64 array (format '", info.format, "')"));
  }
  keep->push_back(std::move(info));
  return absl::MakeConstSpan(static_cast<const uint64_t*>(keep->back().ptr),
                             static_cast<size_t>(keep->back().size));
}

// A sparse pull's or push's (table, keys, rows): rows holds len(keys) rows of the table's width
// (WorkerSession checks that), C-contiguous float32.
using SparseTriple = std::tuple<std::string, py::object, py::object>;

// The rows of sparse table `table`: C-contiguous float32, as many as WorkerSession checks.
absl::Span<float> RowsOf(const std::string& table, const py::handle& array, bool writable,
                         std::vector<py::buffer_info>* keep) {
  return FloatsOf("rows of sparse table " + table, array, /*count=*/-1, writable, keep);
}

// A worker's pulls and pushes of one job (WorkerSession), on a Client's connections.
class Session {
 public:
  Session(std::shared_ptr<PsClient> client, const py::bytes& spec_bytes, int worker,
          int incarnation)
      : client_(std::move(client)), spec_(ParseSpec(spec_bytes)) {
    const ConsistencyConfig::Mode mode = spec_.consistency().mode();
    const ModeTraits& traits = ModeTraitsOf(mode);  // A validated spec's mode.
    if (!traits.shards_hold_the_model || traits.center_moves_by_differences) {
      throw py::value_error(absl::StrCat(
          "a Python worker pulls the model from the shards and pushes gradients: ",
          ConsistencyConfig::Mode_Name(mode),
          " is not such a mode; use SYNC, ASYNC, SSP, SOFTSYNC or DELAYED"));
    }
    counts_steps_ = traits.barrier;
    session_ = ValueOrThrow(WorkerSession::Create(client_.get(), spec_, worker, incarnation));
    for (const VariableDef& def : spec_.variables()) {
      int64_t count = 1;
      for (int64_t dim : def.shape()) count *= dim;
      sizes_.emplace_back(def.name(), count);
    }
  }

  // Push(gradients) then Pull(out) for the next step (`next_step`, `next_clock`), in one round
  // trip per shard where the gradients fit one message (WorkerSession::PushPull). Returns
  // (the pushes' answers, the pull's dict).
  py::tuple PushPull(const py::dict& gradients, int64_t step, int64_t clock, const py::dict& out,
                     int64_t next_step, int64_t next_clock) {
    std::vector<py::buffer_info> keep;
    const MutableVariables spans = Spans(gradients, /*writable=*/false, &keep);
    const ConstVariables variables(spans.begin(), spans.end());
    const MutableVariables targets = Spans(out, /*writable=*/true, &keep);
    ThrowIfError(session_->CheckFinite(variables));
    WorkerSession::PushOptions push;
    push.step = step;
    push.clock = clock;
    WorkerSession::PullOptions pull;
    pull.step = next_step;
    pull.clock = next_clock;
    absl::StatusOr<WorkerSession::PushPullResult> result;
    {
      py::gil_scoped_release release;
      result = session_->PushPull(push, variables, pull, targets);
    }
    WorkerSession::PushPullResult both = ValueOrThrow(std::move(result));
    return py::make_tuple(PushList(both.pushed), PullDict(both.pulled));
  }

  // Whether the shards count steps (SYNC's barrier): a pull then names the step it waits for.
  bool counts_steps() const { return counts_steps_; }
  // The bytes this session's calls sent and received (requests and answers, as ps_worker
  // counts them).
  int64_t bytes_sent() const { return session_->bytes_sent(); }
  int64_t bytes_received() const { return session_->bytes_received(); }
  std::string job_id() const { return spec_.job_id(); }
  std::string run_id() const { return spec_.run_id(); }

  // (name, shape) of each variable, in the job's order.
  std::vector<std::pair<std::string, std::vector<int64_t>>> Variables() const {
    std::vector<std::pair<std::string, std::vector<int64_t>>> variables;
    for (const VariableDef& def : spec_.variables()) {
      variables.emplace_back(def.name(),
                             std::vector<int64_t>(def.shape().begin(), def.shape().end()));
    }
    return variables;
  }

  // Fills `out` (name -> array, every variable) from all shards. Returns
  // {"versions": [...], "step": s, "parked_s": seconds}.
  py::dict Pull(const py::dict& out, int64_t step, int64_t clock,
                const std::vector<SparseTriple>& sparse) {
    std::vector<py::buffer_info> keep;
    MutableVariables variables = Spans(out, /*writable=*/true, &keep);
    std::vector<WorkerSession::SparsePull> rows;
    for (const auto& [table, keys, values] : sparse) {
      rows.push_back({table, KeysOf(table, keys, &keep), RowsOf(table, values, true, &keep)});
    }
    WorkerSession::PullOptions options;
    options.step = step;
    options.clock = clock;
    absl::StatusOr<WorkerSession::PullResult> result;
    {
      py::gil_scoped_release release;
      result = session_->Pull(options, variables, rows);
    }
    return PullDict(ValueOrThrow(std::move(result)));
  }

  // Sends `gradients` (name -> array, every variable) to all shards; returns each shard's
  // answer as a dict (outcome, version, staleness, step).
  py::list Push(const py::dict& gradients, int64_t step, int64_t clock,
                const std::vector<SparseTriple>& sparse) {
    std::vector<py::buffer_info> keep;
    const MutableVariables spans = Spans(gradients, /*writable=*/false, &keep);
    const ConstVariables variables(spans.begin(), spans.end());
    std::vector<WorkerSession::SparsePush> rows;
    for (const auto& [table, keys, values] : sparse) {
      rows.push_back({table, KeysOf(table, keys, &keep), RowsOf(table, values, false, &keep)});
    }
    WorkerSession::PushOptions options;
    options.step = step;
    options.clock = clock;
    // Refused before any shard gets its part, so that none applies a push another refuses.
    ThrowIfError(session_->CheckFinite(variables, rows));
    absl::StatusOr<std::vector<PushResponse>> responses;
    {
      py::gil_scoped_release release;
      responses = session_->Push(options, variables, rows);
    }
    return PushList(ValueOrThrow(std::move(responses)));
  }

 private:
  // Every variable of the job in `arrays`, and nothing else.
  void CheckNames(const py::dict& arrays) const {
    std::vector<std::string> missing, unknown;
    for (const auto& [name, count] : sizes_) {
      if (!arrays.contains(py::str(name))) missing.push_back(name);
    }
    for (const auto& item : arrays) {
      const std::string name = py::str(item.first);
      bool known = false;
      for (const auto& [variable, count] : sizes_) known = known || variable == name;
      if (!known) unknown.push_back(name);
    }
    if (!missing.empty() || !unknown.empty()) {
      throw py::key_error(absl::StrCat(
          "the arrays must be the job's variables, each once: ",
          missing.empty() ? "" : absl::StrCat("missing ", absl::StrJoin(missing, ", "), "; "),
          unknown.empty() ? "" : absl::StrCat("not in the job: ", absl::StrJoin(unknown, ", "))));
    }
  }
  // The job's variables in `arrays` as spans of their buffers (`writable`: a pull's), held in
  // `keep`.
  MutableVariables Spans(const py::dict& arrays, bool writable,
                         std::vector<py::buffer_info>* keep) const {
    CheckNames(arrays);
    MutableVariables variables;
    for (const auto& [name, count] : sizes_) {
      variables[name] = FloatsOf(name, arrays[py::str(name)], count, writable, keep);
    }
    return variables;
  }
  static py::dict PullDict(const WorkerSession::PullResult& result) {
    py::dict dict;
    dict["versions"] = result.versions;
    dict["step"] = result.step;
    dict["parked_s"] = absl::ToDoubleSeconds(result.parked);
    return dict;
  }
  static py::list PushList(const std::vector<PushResponse>& responses) {
    py::list list;
    for (const PushResponse& response : responses) {
      py::dict dict;
      dict["outcome"] = PushResponse::Outcome_Name(response.outcome());
      dict["version"] = response.version();
      dict["staleness"] = response.staleness();
      dict["step"] = response.step();
      list.append(dict);
    }
    return list;
  }

  const std::shared_ptr<PsClient> client_;  // Outlives session_.
  const ParameterSpec spec_;
  std::unique_ptr<WorkerSession> session_;
  std::vector<std::pair<std::string, int64_t>> sizes_;  // Per variable, its elements.
  bool counts_steps_ = false;
};

std::shared_ptr<PsClient> MakeClient(const std::vector<std::string>& addresses,
                                     const std::string& ca_file, const std::string& cert_file,
                                     const std::string& key_file, const std::string& token,
                                     double wait_timeout_s, double call_timeout_s) {
  PsClientOptions options;
  options.ps_addresses = addresses;
  options.security.ca_file = ca_file;
  options.security.cert_file = cert_file;
  options.security.key_file = key_file;
  options.token = token;
  options.wait_timeout = absl::Seconds(wait_timeout_s);
  options.call_timeout = absl::Seconds(call_timeout_s);
  return ValueOrThrow(PsClient::Create(options));
}

// Creates the job of `spec` on every shard (PsClient::CreateJob). `initial_values` (name ->
// array, every variable, C-contiguous float32 of its size): the chief's, for a job whose
// variables start at them (ParameterSpec.chief_initializes); None for another worker, which
// then waits for the chief to create the job.
void CreateJob(PsClient& client, const py::bytes& spec, const py::object& initial_values) {
  const ParameterSpec parsed = ParseSpec(spec);
  std::vector<py::buffer_info> keep;
  PsClient::InitialValues values;
  if (!initial_values.is_none()) {
    const py::dict arrays = initial_values.cast<py::dict>();
    for (const VariableDef& def : parsed.variables()) {
      if (!arrays.contains(py::str(def.name()))) {
        throw py::key_error(absl::StrCat("initial values: no array for variable ", def.name()));
      }
      int64_t count = 1;
      for (int64_t dim : def.shape()) count *= dim;
      values[def.name()] = FloatsOf(def.name(), arrays[py::str(def.name())], count,
                                    /*writable=*/false, &keep);
    }
    for (const auto& item : arrays) {
      const std::string name = py::str(item.first);
      if (!values.contains(name)) {
        throw py::key_error(absl::StrCat("initial values: ", name, " is not a variable of job ",
                                         parsed.job_id()));
      }
    }
  }
  absl::Status status;
  {
    py::gil_scoped_release release;
    status = client.CreateJob(parsed, nullptr, initial_values.is_none() ? nullptr : &values)
                 .status();
  }
  ThrowIfError(status);  // Raising needs the GIL.
}

}  // namespace
}  // namespace ps

PYBIND11_MODULE(_client, module) {
  using ps::Session;
  module.doc() = "The parameter-server worker client (C++), bound for Python; use the ps package.";
  ps::ErrorType() = py::reinterpret_borrow<py::object>(
      PyErr_NewExceptionWithDoc("ps.Error",
                                "A call to the parameter servers failed; .code is its status "
                                "code's name.",
                                PyExc_RuntimeError, nullptr));
  module.attr("Error") = ps::ErrorType();
  using TableDefs = std::vector<std::tuple<std::string, int64_t, std::string, float>>;
  module.def("make_parameter_spec", &ps::MakeParameterSpec, py::arg("job_json"),
             py::arg("variables"), py::arg("num_workers"), py::arg("tables") = TableDefs{},
             py::arg("chief_initializes") = false);
  module.def("spec_json", &ps::SpecJson, py::arg("spec"));

  py::class_<ps::PsClient, std::shared_ptr<ps::PsClient>>(module, "Client")
      .def(py::init(&ps::MakeClient), py::arg("addresses"), py::arg("ca_file") = "",
           py::arg("cert_file") = "", py::arg("key_file") = "", py::arg("token") = "",
           py::arg("wait_timeout_s") = 60.0, py::arg("call_timeout_s") = 30.0)
      .def_property_readonly("num_ps", &ps::PsClient::num_ps)
      .def("create_job", &ps::CreateJob, py::arg("spec"), py::arg("initial_values") = py::none())
      .def("delete_job",
           [](ps::PsClient& client, const std::string& job_id) {
             absl::Status status;
             {
               py::gil_scoped_release release;
               status = client.DeleteJob(job_id);
             }
             ps::ThrowIfError(status);
           },
           py::arg("job_id"))
      .def("leave_job",
           [](ps::PsClient& client, const std::string& job_id, const std::string& run_id,
              int worker, std::optional<int> incarnation) {
             absl::Status status;
             {
               py::gil_scoped_release release;
               status = client.LeaveJob(job_id, run_id, worker, /*replicated=*/false,
                                        incarnation);
             }
             ps::ThrowIfError(status);
           },
           py::arg("job_id"), py::arg("run_id"), py::arg("worker"),
           py::arg("incarnation") = py::none())
      .def("job_stats_json",
           [](ps::PsClient& client, const std::string& job_id) {
             absl::StatusOr<std::vector<ps::JobStats>> stats;
             {
               py::gil_scoped_release release;
               stats = client.GetJobStats(job_id);
             }
             std::vector<std::string> json;
             for (const ps::JobStats& shard : ps::ValueOrThrow(std::move(stats))) {
               google::protobuf::util::JsonPrintOptions options;
               options.preserve_proto_field_names = true;
               options.always_print_primitive_fields = true;
               (void)google::protobuf::util::MessageToJsonString(shard, &json.emplace_back(),
                                                                 options);
             }
             return json;
           },
           py::arg("job_id"));

  py::class_<Session>(module, "Session")
      .def(py::init<std::shared_ptr<ps::PsClient>, const py::bytes&, int, int>(),
           py::arg("client"), py::arg("spec"), py::arg("worker"), py::arg("incarnation") = 0)
      .def_property_readonly("variables", &Session::Variables)
      .def_property_readonly("counts_steps", &Session::counts_steps)
      .def_property_readonly("bytes_sent", &Session::bytes_sent)
      .def_property_readonly("bytes_received", &Session::bytes_received)
      .def_property_readonly("job_id", &Session::job_id)
      .def_property_readonly("run_id", &Session::run_id)
      .def("pull", &Session::Pull, py::arg("out"), py::arg("step") = 0, py::arg("clock") = 0,
           py::arg("sparse") = std::vector<ps::SparseTriple>{})
      .def("push", &Session::Push, py::arg("gradients"), py::arg("step") = 0,
           py::arg("clock") = 0, py::arg("sparse") = std::vector<ps::SparseTriple>{})
      .def("push_pull", &Session::PushPull, py::arg("gradients"), py::arg("step"),
           py::arg("clock"), py::arg("out"), py::arg("next_step"), py::arg("next_clock"));
}
