#include "worker/data/file_contents.h"

#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/file_system.h"

namespace ps {
namespace data_internal {
namespace {

constexpr size_t kChunkBytes = size_t{1} << 20;

struct GzCloser {
  void operator()(gzFile_s* file) const { gzclose(file); }
};

absl::Status OpenError(const std::string& path, int error) {
  std::string message = absl::StrCat(path, ": cannot open: ", std::strerror(error));
  if (error == ENOENT) return absl::NotFoundError(message);
  return absl::InvalidArgumentError(message);
}

absl::Status ReadGzip(const std::string& path, std::string* bytes) {
  errno = 0;
  std::unique_ptr<gzFile_s, GzCloser> file(gzopen(path.c_str(), "rb"));
  if (file == nullptr) return OpenError(path, errno != 0 ? errno : ENOMEM);
  std::string chunk(kChunkBytes, '\0');
  int got;
  while ((got = gzread(file.get(), chunk.data(), static_cast<unsigned>(chunk.size()))) > 0) {
    bytes->append(chunk, 0, static_cast<size_t>(got));
  }
  int error = Z_OK;
  const char* message = gzerror(file.get(), &error);
  if (got < 0 || error != Z_OK) {
    // Z_BUF_ERROR: the compressed stream ends early (a truncated .gz file).
    return absl::DataLossError(absl::StrCat(
        path, " (gzip): ",
        error == Z_BUF_ERROR ? "compressed data ends early" : "corrupt compressed data",
        " at decompressed byte ", bytes->size(), ": ", message));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<FileContents> ReadFileContents(const std::string& path, FileSystem* fs) {
  absl::StatusOr<std::string> bytes = fs->ReadFile(path);
  if (!bytes.ok()) {
    if (absl::IsNotFound(bytes.status())) return bytes.status();
    return absl::InvalidArgumentError(bytes.status().message());
  }
  FileContents contents;
  if (bytes->size() >= 2 && static_cast<unsigned char>((*bytes)[0]) == 0x1f &&
      static_cast<unsigned char>((*bytes)[1]) == 0x8b) {
    contents.gzipped = true;
    if (absl::Status status = ReadGzip(path, &contents.bytes); !status.ok()) return status;
    return contents;
  }
  contents.bytes = *std::move(bytes);
  return contents;
}

std::string DescribeFile(const std::string& path, const FileContents& contents) {
  return contents.gzipped ? absl::StrCat(path, " (decompressed)") : path;
}

}  // namespace data_internal
}  // namespace ps
