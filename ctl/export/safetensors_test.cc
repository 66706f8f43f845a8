#include "ctl/export/safetensors.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/testing/fault_injecting_file_system.h"

namespace ps {
namespace {

using ::testing::HasSubstr;

std::string TempPath(const std::string& name) {
  return std::string(std::getenv("TEST_TMPDIR")) + "/" + name;
}

std::string ReadAll(const std::string& path) {
  absl::StatusOr<std::string> bytes = FileSystem::Default()->ReadFile(path);
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  return bytes.ok() ? *bytes : "";
}

// A plain write, without the atomic write's fsync: the corruption tests write a thousand files.
void WriteAll(const std::string& path, const std::string& bytes) {
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  file.write(bytes.data(), bytes.size());
  ASSERT_TRUE(file.good()) << path;
}

// A file of `header` (unpadded) and `data`, for files WriteSafetensors would not write.
std::string RawFile(const std::string& header, const std::string& data) {
  std::string bytes;
  for (int i = 0; i < 8; ++i) bytes.push_back(static_cast<char>((header.size() >> (8 * i)) & 0xff));
  return bytes + header + data;
}

uint64_t HeaderLength(const std::string& bytes) {
  uint64_t length = 0;
  for (int i = 0; i < 8; ++i) {
    length |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[i])) << (8 * i);
  }
  return length;
}

// Three tensors and their values, kept alive for the spans.
struct Sample {
  std::vector<float> matrix = {1.5f, -2.0f, 3.25f, 0.0f, 7.0f, 8.0f};
  std::vector<float> scalar = {42.5f};
  std::vector<SafetensorsTensor> tensors = {
      {"layer0/weights", {2, 3}, matrix},
      {"scalar", {}, scalar},
      {"empty", {0, 4}, {}},
  };
};

TEST(SafetensorsTest, RoundTripsTensorsAndMetadata) {
  const std::string path = TempPath("round_trip.safetensors");
  Sample sample;
  const std::map<std::string, std::string> metadata = {{"format", "pt"}, {"step", "12"}};
  ASSERT_TRUE(WriteSafetensors(path, sample.tensors, metadata).ok());

  std::map<std::string, std::string> read_metadata = {{"stale", "entry"}};
  auto read = ReadSafetensors(path, &read_metadata);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read_metadata, metadata);
  ASSERT_EQ(read->size(), 3u);
  EXPECT_EQ(read->at("layer0/weights").shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(read->at("layer0/weights").values, sample.matrix);
  EXPECT_EQ(read->at("scalar").shape, std::vector<int64_t>{});
  EXPECT_EQ(read->at("scalar").values, sample.scalar);
  EXPECT_EQ(read->at("empty").shape, (std::vector<int64_t>{0, 4}));
  EXPECT_TRUE(read->at("empty").values.empty());
}

TEST(SafetensorsTest, HeaderIsPaddedToEightBytesAndMetadataOmittedWhenEmpty) {
  const std::string path = TempPath("aligned.safetensors");
  Sample sample;
  ASSERT_TRUE(WriteSafetensors(path, sample.tensors).ok());
  const std::string bytes = ReadAll(path);
  const uint64_t length = HeaderLength(bytes);
  EXPECT_EQ((8 + length) % 8, 0u);
  ASSERT_EQ(bytes.size(), 8 + length + (6 + 1) * sizeof(float));
  const std::string header = bytes.substr(8, length);
  EXPECT_EQ(header.find("__metadata__"), std::string::npos) << header;
  // In the order given, and contiguous.
  EXPECT_THAT(header, HasSubstr("\"data_offsets\":[0,24]"));
  EXPECT_THAT(header, HasSubstr("\"data_offsets\":[24,28]"));
  EXPECT_THAT(header, HasSubstr("\"data_offsets\":[28,28]"));

  std::map<std::string, std::string> metadata = {{"stale", "entry"}};
  ASSERT_TRUE(ReadSafetensors(path, &metadata).ok());
  EXPECT_TRUE(metadata.empty());
}

TEST(SafetensorsTest, WritesTheExactBytes) {
  const std::string path = TempPath("tiny.safetensors");
  const std::vector<float> values = {1.0f, -2.0f};
  ASSERT_TRUE(WriteSafetensors(path, {{"a", {2}, values}}, {{"k", "v"}}).ok());
  // 79 bytes of JSON and one space: N = 80 (0x50).
  const std::string expected =
      std::string("\x50\0\0\0\0\0\0\0", 8) +
      R"({"__metadata__":{"k":"v"},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}} )" +
      std::string("\x00\x00\x80\x3f", 4) +  // 1.0f
      std::string("\x00\x00\x00\xc0", 4);   // -2.0f
  EXPECT_EQ(ReadAll(path), expected);
}

TEST(SafetensorsTest, NamesAreEscaped) {
  const std::string path = TempPath("escaped.safetensors");
  const std::vector<float> values = {1.0f};
  const std::string name = "say \"hi\"\\\n\xc3\xbc";  // Quotes, backslash, newline, "ü".
  ASSERT_TRUE(WriteSafetensors(path, {{name, {1}, values}}, {{"note", "a \"quoted\" value"}}).ok());
  std::map<std::string, std::string> metadata;
  auto read = ReadSafetensors(path, &metadata);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->count(name), 1u);
  EXPECT_EQ(metadata.at("note"), "a \"quoted\" value");
}

TEST(SafetensorsTest, InvalidInputIsRefusedNamingTheTensorAndWritesNothing) {
  const std::vector<float> six(6, 1.0f);
  struct Case {
    std::vector<SafetensorsTensor> tensors;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{{"w", {2, 3}, six}, {"w", {6}, six}}, "\"w\": the name is given twice"},
      {{{"", {6}, six}}, "the name is empty"},
      {{{"__metadata__", {6}, six}}, "\"__metadata__\": the name is reserved"},
      {{{"w", {2, 2}, six}}, "\"w\": shape [2, 2] does not hold the 6 values"},
      {{{"w", {7}, six}}, "\"w\": shape [7] does not hold the 6 values"},
      {{{"w", {}, six}}, "\"w\": shape [] does not hold the 6 values"},
      {{{"w", {-2, -3}, six}}, "\"w\": shape [-2, -3] has a negative dimension"},
      {{{"w", {1LL << 62, 1LL << 62}, six}}, "\"w\": shape [4611686018427387904, "},
      {{{"bad\xff", {6}, six}}, "\"bad\xff\": the name is not valid UTF-8"},
  };
  const std::string path = TempPath("invalid.safetensors");
  for (const Case& c : cases) {
    absl::Status status = WriteSafetensors(path, c.tensors);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.message;
    EXPECT_THAT(status.message(), HasSubstr(c.message));
    EXPECT_THAT(status.message(), HasSubstr(path));
    EXPECT_FALSE(std::filesystem::exists(path)) << c.message;
  }
  absl::Status status = WriteSafetensors(path, {{"w", {6}, six}}, {{"key", "\xc3"}});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("metadata entry \"key\""));
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(SafetensorsTest, DamagedFilesAreDataLossNamingThePathAndTheFault) {
  const std::string f4(4, '\0');  // One float32 0.
  const std::string tensor = R"("t":{"dtype":"F32","shape":[1],"data_offsets":[0,4]})";
  struct Case {
    std::string bytes;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"", "it has 0 bytes"},
      {std::string("\x08\0\0", 3), "it has 3 bytes"},
      {std::string("\x40\0\0\0\0\0\0\0{}", 10), "the header's length 64 runs past the end"},
      {std::string(8, '\xff') + "{}", "the header's length 18446744073709551615 runs past"},
      {RawFile("{\"t\":", ""), "the header is not JSON"},
      {RawFile("[1, 2]", ""), "the header is not a JSON object"},
      {RawFile("{\"t\":[]}", ""), "tensor \"t\" is [], not an object"},
      {RawFile(R"({"t":{"shape":[1],"data_offsets":[0,4]}})", f4), "no \"dtype\""},
      {RawFile(R"({"t":{"dtype":"F32","data_offsets":[0,4]}})", f4), "no \"shape\""},
      {RawFile(R"({"t":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", f4),
       "shape [-1], not a list of non-negative integers"},
      {RawFile(R"({"t":{"dtype":"F32","shape":[1.0],"data_offsets":[0,4]}})", f4),
       "not a list of non-negative integers"},
      {RawFile(R"({"t":{"dtype":"F32","shape":[1],"data_offsets":[0]}})", f4),
       "no \"data_offsets\" pair"},
      {RawFile(R"({"t":{"dtype":"F32","shape":[1],"data_offsets":[0,8]}})", f4),
       "data_offsets [0,8] outside the data section's 4 bytes"},
      {RawFile(R"({"t":{"dtype":"F32","shape":[1],"data_offsets":[4,0]}})", f4),
       "data_offsets [4,0], which end before they begin"},
      {RawFile(R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})", f4),
       "which do not hold shape [2]"},
      {RawFile(R"({"t":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4]}})", f4),
       "which do not hold shape"},
      {RawFile(R"({"t":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
               R"("u":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
               f4),
       "tensors \"t\" and \"u\" overlap"},
      {RawFile(R"({"t":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", f4 + f4),
       "bytes 0 to 4 of the data section belong to no tensor"},
      {RawFile("{" + tensor + "}", f4 + "xx"), "has 6 bytes but its tensors end at byte 4"},
      {RawFile("{" + tensor + ",\"__metadata__\":{\"k\":1}}", f4),
       "\"__metadata__\" holds 1 for \"k\", not a string"},
      {RawFile("{" + tensor + ",\"__metadata__\":[]}", f4), "\"__metadata__\" is not an object"},
      {RawFile(R"({"t":{"dtype":"F16","shape":[2],"data_offsets":[0,4]}})", f4),
       "dtype \"F16\", but ReadSafetensors reads F32 only"},
  };
  const std::string path = TempPath("damaged.safetensors");
  for (const Case& c : cases) {
    WriteAll(path, c.bytes);
    auto read = ReadSafetensors(path);
    EXPECT_EQ(read.status().code(), absl::StatusCode::kDataLoss) << c.message;
    EXPECT_THAT(read.status().message(), HasSubstr(c.message));
    EXPECT_THAT(read.status().message(), HasSubstr(path));
  }
  // The hand-made header itself is sound.
  WriteAll(path, RawFile("{" + tensor + "}", f4));
  EXPECT_TRUE(ReadSafetensors(path).ok());
}

TEST(SafetensorsTest, TruncatedOrCorruptedFilesAreDataLossNeverACrash) {
  const std::string path = TempPath("whole.safetensors");
  Sample sample;
  ASSERT_TRUE(WriteSafetensors(path, sample.tensors, {{"k", "v"}}).ok());
  const std::string whole = ReadAll(path);
  const uint64_t header_end = 8 + HeaderLength(whole);
  const std::string cut = TempPath("cut.safetensors");
  for (size_t size = 0; size < whole.size(); ++size) {
    WriteAll(cut, whole.substr(0, size));
    EXPECT_EQ(ReadSafetensors(cut).status().code(), absl::StatusCode::kDataLoss) << size;
  }
  // Every byte of the length and the header changed: an error (DATA_LOSS) or, where the change
  // leaves valid JSON of the same meaning (a space), a file read as before.
  for (size_t at = 0; at < header_end; ++at) {
    for (char replacement : {'\0', ' ', '"', '9', '}', '\xff'}) {
      if (whole[at] == replacement) continue;
      std::string corrupted = whole;
      corrupted[at] = replacement;
      WriteAll(cut, corrupted);
      auto read = ReadSafetensors(cut);
      if (!read.ok()) {
        EXPECT_EQ(read.status().code(), absl::StatusCode::kDataLoss) << at << read.status();
      }
    }
  }
  const std::string header = whole.substr(8, header_end - 8);
  std::string bad_json = whole;
  bad_json[8 + header.find(':')] = '#';
  WriteAll(cut, bad_json);
  EXPECT_THAT(ReadSafetensors(cut).status().message(), HasSubstr("the header is not JSON"));

  EXPECT_EQ(ReadSafetensors(TempPath("missing.safetensors")).status().code(),
            absl::StatusCode::kNotFound);
}

TEST(SafetensorsTest, AFailedWriteLeavesNoFile) {
  FaultInjectingFileSystem fs;
  fs.FailWrites(".safetensors");
  const std::string path = TempPath("full.safetensors");
  Sample sample;
  absl::Status status = WriteSafetensors(path, sample.tensors, {}, &fs);
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(status.message(), HasSubstr(path));
  EXPECT_EQ(fs.failed_writes(), 1);
  EXPECT_FALSE(std::filesystem::exists(path));
  for (const auto& entry : std::filesystem::directory_iterator(
           std::filesystem::path(path).parent_path())) {  // No "<path>.tmp.*" left either.
    EXPECT_NE(entry.path().filename().string().rfind("full.safetensors.tmp", 0), 0u)
        << entry.path();
  }
}

// NumPy reads the file with nothing but the format's description: one JSON line per tensor
// (name, shape, dtype, sum, values in C order), then the metadata.
constexpr char kNumpyReader[] = R"(
import json, struct, sys
try:
    import numpy
except ImportError:
    sys.exit(3)
data = open(sys.argv[1], "rb").read()
(n,) = struct.unpack("<Q", data[:8])
header = json.loads(data[8:8 + n])
body = data[8 + n:]
for name, info in header.items():
    if name == "__metadata__":
        continue
    begin, end = info["data_offsets"]
    a = numpy.frombuffer(body[begin:end], dtype="<f4").reshape(info["shape"])
    print(json.dumps([name, list(a.shape), str(a.dtype), float(a.sum(dtype="float64")),
                      a.ravel().tolist()]))
print(json.dumps(header.get("__metadata__", {})))
)";

TEST(SafetensorsTest, NumpyReadsIt) {
  // Debian's python3, where python3-numpy installs (a python3 earlier on PATH may lack it).
  const std::string python = "/usr/bin/python3";
  if (access(python.c_str(), X_OK) != 0) {
    GTEST_SKIP() << python << " is missing: install python3 and python3-numpy (tools/setup.sh "
                 << "does) to run this test";
  }
  const std::string path = TempPath("numpy.safetensors");
  Sample sample;
  const std::vector<float> quoted_values = {-0.5f, 0.25f};
  sample.tensors.push_back({"say \"hi\" \xc3\xbc", {2, 1}, quoted_values});
  ASSERT_TRUE(WriteSafetensors(path, sample.tensors, {{"step", "12"}}).ok());

  const std::string command = python + " -c '" + kNumpyReader + "' '" + path + "' 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string output;
  char buffer[4096];
  for (size_t n; (n = fread(buffer, 1, sizeof(buffer), pipe)) > 0;) output.append(buffer, n);
  const int status = pclose(pipe);
  ASSERT_TRUE(WIFEXITED(status)) << output;
  if (WEXITSTATUS(status) == 3) {
    GTEST_SKIP() << "numpy is missing from " << python << ": install python3-numpy "
                 << "(tools/setup.sh does, with python3-matplotlib) to run this test";
  }
  ASSERT_EQ(WEXITSTATUS(status), 0) << output;

  std::vector<nlohmann::json> lines;
  std::istringstream stream(output);
  for (std::string line; std::getline(stream, line);) lines.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(lines.size(), sample.tensors.size() + 1) << output;
  for (size_t i = 0; i < sample.tensors.size(); ++i) {
    const SafetensorsTensor& tensor = sample.tensors[i];
    const nlohmann::json& line = lines[i];
    EXPECT_EQ(line[0], tensor.name);
    EXPECT_EQ(line[1].get<std::vector<int64_t>>(), tensor.shape) << tensor.name;
    EXPECT_EQ(line[2], "float32") << tensor.name;
    double sum = 0;
    for (float value : tensor.values) sum += value;
    EXPECT_EQ(line[3].get<double>(), sum) << tensor.name;
    EXPECT_EQ(line[4].get<std::vector<float>>(),
              std::vector<float>(tensor.values.begin(), tensor.values.end()))
        << tensor.name;
  }
  EXPECT_EQ(lines.back(), nlohmann::json({{"step", "12"}}));
}

}  // namespace
}  // namespace ps
