// Whole-file reads for the data readers, plain or gzip-compressed.
#ifndef PS_WORKER_DATA_FILE_CONTENTS_H_
#define PS_WORKER_DATA_FILE_CONTENTS_H_

#include <string>

#include "absl/status/statusor.h"
#include "common/file_system.h"

namespace ps {
namespace data_internal {

struct FileContents {
  std::string bytes;     // Decompressed when the file is gzip.
  bool gzipped = false;  // The file starts with gzip's magic, 0x1f 0x8b.
};

// Reads the file at `path` through `fs`, decompressing it when it starts with gzip's magic.
// NOT_FOUND when it does not exist, DATA_LOSS for corrupt or truncated gzip data,
// INVALID_ARGUMENT for other failures; each message names the path.
absl::StatusOr<FileContents> ReadFileContents(const std::string& path,
                                              FileSystem* fs = FileSystem::Default());

// How messages about byte offsets in `contents` name the file: the path, marked when the
// offsets count decompressed bytes.
std::string DescribeFile(const std::string& path, const FileContents& contents);

}  // namespace data_internal
}  // namespace ps

#endif  // PS_WORKER_DATA_FILE_CONTENTS_H_
