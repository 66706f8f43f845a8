#include "worker/data/file_contents.h"

#include <zlib.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace ps {
namespace data_internal {
namespace {

constexpr size_t kChunkBytes = size_t{1} << 20;

struct FileCloser {
  void operator()(std::FILE* file) const { std::fclose(file); }
};
struct GzCloser {
  void operator()(gzFile_s* file) const { gzclose(file); }
};

absl::Status OpenError(const std::string& path, int error) {
  std::string message = absl::StrCat(path, ": cannot open: ", std::strerror(error));
  if (error == ENOENT) return absl::NotFoundError(message);
  return absl::InvalidArgumentError(message);
}

absl::Status ReadPlain(const std::string& path, std::FILE* file, std::string* bytes) {
  std::string chunk(kChunkBytes, '\0');
  size_t got;
  while ((got = std::fread(chunk.data(), 1, chunk.size(), file)) > 0) bytes->append(chunk, 0, got);
  if (std::ferror(file)) {
    return absl::DataLossError(absl::StrCat(path, ": read failed at byte ", bytes->size()));
  }
  return absl::OkStatus();
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

absl::StatusOr<FileContents> ReadFileContents(const std::string& path) {
  errno = 0;
  std::unique_ptr<std::FILE, FileCloser> file(std::fopen(path.c_str(), "rb"));
  if (file == nullptr) return OpenError(path, errno);
  FileContents contents;
  unsigned char magic[2] = {0, 0};
  const size_t magic_bytes = std::fread(magic, 1, sizeof(magic), file.get());
  if (magic_bytes == 2 && magic[0] == 0x1f && magic[1] == 0x8b) {
    file.reset();
    contents.gzipped = true;
    if (absl::Status status = ReadGzip(path, &contents.bytes); !status.ok()) return status;
    return contents;
  }
  contents.bytes.assign(reinterpret_cast<const char*>(magic), magic_bytes);
  if (absl::Status status = ReadPlain(path, file.get(), &contents.bytes); !status.ok()) {
    return status;
  }
  return contents;
}

std::string DescribeFile(const std::string& path, const FileContents& contents) {
  return contents.gzipped ? absl::StrCat(path, " (decompressed)") : path;
}

}  // namespace data_internal
}  // namespace ps
