// The file format of a shard's checkpoint (issue 13: what a shard's checkpoint holds is a
// sequence of tagged blocks; which blocks, and when they are taken, is the checkpointing code's).
//
// Layout, every integer little-endian:
//   header   8 bytes  magic "PSCKPT\r\n" (the line break catches text-mode mangling)
//            4 bytes  format version (kCheckpointFormatVersion)
//            4 bytes  number of blocks
//   blocks   each:    4 bytes tag, 4 bytes zero, 8 bytes payload length, the payload, then
//                     8 bytes XXH3-64 of the tag, the zero, the length and the payload
//   nothing after the last block.
// A truncated file, a flipped bit anywhere after the header, trailing bytes or a wrong magic is
// DATA_LOSS naming the file and where; a newer format version is FAILED_PRECONDITION. Reading
// never returns a block that did not verify.
//
// Written atomically through a FileSystem (temporary file, fsync, rename, fsync of the
// directory), so a reader sees the previous file or the whole new one.
#ifndef PS_SERVER_CHECKPOINT_FILE_H_
#define PS_SERVER_CHECKPOINT_FILE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/file_system.h"

namespace ps {

inline constexpr uint32_t kCheckpointFormatVersion = 1;

struct CheckpointBlock {
  uint32_t tag = 0;     // What the payload is; the checkpointing code assigns tags.
  std::string payload;  // Any bytes.
};

// The file's bytes for `blocks`, in order.
std::string EncodeCheckpointFile(const std::vector<CheckpointBlock>& blocks);
// The blocks of a file's bytes; `name` is used in errors (the path, usually).
absl::StatusOr<std::vector<CheckpointBlock>> DecodeCheckpointFile(absl::string_view bytes,
                                                                  absl::string_view name);

// Writes `blocks` to `path` atomically. On failure `path` keeps what it held.
absl::Status WriteCheckpointFile(FileSystem* fs, const std::string& path,
                                 const std::vector<CheckpointBlock>& blocks);
absl::StatusOr<std::vector<CheckpointBlock>> ReadCheckpointFile(FileSystem* fs,
                                                                const std::string& path);

}  // namespace ps

#endif  // PS_SERVER_CHECKPOINT_FILE_H_
