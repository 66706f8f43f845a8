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
#ifndef PS_COMMON_CHECKPOINT_CHECKPOINT_FILE_H_
#define PS_COMMON_CHECKPOINT_CHECKPOINT_FILE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/file_system.h"

namespace ps {

inline constexpr uint32_t kCheckpointFormatVersion = 1;

struct CheckpointBlock {
  CheckpointBlock() = default;
  CheckpointBlock(uint32_t tag, std::string payload) : tag(tag), payload(std::move(payload)) {}
  // A block of bytes held elsewhere (see `external`).
  static CheckpointBlock External(uint32_t tag, absl::string_view bytes,
                                  std::shared_ptr<const void> keep_alive) {
    CheckpointBlock block(tag, "");
    block.external = bytes;
    block.keep_alive = std::move(keep_alive);
    return block;
  }

  uint32_t tag = 0;     // What the payload is; the checkpointing code assigns tags.
  std::string payload;  // Any bytes.
  // Instead of `payload` when that is empty: bytes held elsewhere (a slice's values, which a
  // snapshot holds rather than copies), valid for as long as `keep_alive` lives.
  absl::string_view external;
  std::shared_ptr<const void> keep_alive;

  absl::string_view bytes() const { return payload.empty() ? external : payload; }
};

// What was written: the file's size and XXH3-64 of all its bytes (a manifest names both).
struct CheckpointFileInfo {
  int64_t bytes = 0;
  uint64_t checksum = 0;
};
// XXH3-64 of a whole file's bytes, as CheckpointFileInfo.checksum.
uint64_t CheckpointFileChecksum(absl::string_view bytes);

// The file's bytes for `blocks`, in order.
std::string EncodeCheckpointFile(const std::vector<CheckpointBlock>& blocks);
// The blocks of a file's bytes; `name` is used in errors (the path, usually).
absl::StatusOr<std::vector<CheckpointBlock>> DecodeCheckpointFile(absl::string_view bytes,
                                                                  absl::string_view name);

// Writes `blocks` to `path` atomically. On failure `path` keeps what it held.
absl::StatusOr<CheckpointFileInfo> WriteCheckpointFile(FileSystem* fs, const std::string& path,
                                 const std::vector<CheckpointBlock>& blocks);
absl::StatusOr<std::vector<CheckpointBlock>> ReadCheckpointFile(FileSystem* fs,
                                                                const std::string& path);

}  // namespace ps

#endif  // PS_COMMON_CHECKPOINT_CHECKPOINT_FILE_H_
