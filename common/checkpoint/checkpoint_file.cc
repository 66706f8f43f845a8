#include "common/checkpoint/checkpoint_file.h"

#include <xxhash.h>

#include <cstring>
#include <memory>

#include "absl/strings/str_cat.h"

namespace ps {
namespace {

constexpr char kMagic[8] = {'P', 'S', 'C', 'K', 'P', 'T', '\r', '\n'};
constexpr size_t kHeaderBytes = sizeof(kMagic) + 4 + 4;
constexpr size_t kBlockHeaderBytes = 4 + 4 + 8;
constexpr size_t kChecksumBytes = 8;

void AppendLittleEndian(uint64_t value, int bytes, std::string* out) {
  for (int i = 0; i < bytes; ++i) out->push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

uint64_t ReadLittleEndian(absl::string_view bytes, size_t offset, int count) {
  uint64_t value = 0;
  for (int i = 0; i < count; ++i) {
    value |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[offset + i])) << (8 * i);
  }
  return value;
}

// XXH3-64 of a block's header (tag, zero, length) followed by its payload.
uint64_t BlockChecksum(absl::string_view block_header, absl::string_view payload) {
  std::unique_ptr<XXH3_state_t, decltype(&XXH3_freeState)> state(XXH3_createState(),
                                                                 &XXH3_freeState);
  XXH3_64bits_reset(state.get());
  XXH3_64bits_update(state.get(), block_header.data(), block_header.size());
  XXH3_64bits_update(state.get(), payload.data(), payload.size());
  return XXH3_64bits_digest(state.get());
}

absl::Status Corrupt(absl::string_view name, const std::string& what) {
  return absl::DataLossError(absl::StrCat(
      name, ": not a complete checkpoint file: ", what,
      "; the file was truncated or changed after it was written (use an earlier checkpoint)"));
}

// Hands the file's bytes for `blocks` to `sink` in order, a header or a block at a time; stops
// at the first error it returns.
template <typename Sink>
absl::Status EncodeInto(const std::vector<CheckpointBlock>& blocks, Sink sink) {
  std::string header(kMagic, sizeof(kMagic));
  AppendLittleEndian(kCheckpointFormatVersion, 4, &header);
  AppendLittleEndian(blocks.size(), 4, &header);
  absl::Status status = sink(header);
  for (size_t i = 0; status.ok() && i < blocks.size(); ++i) {
    const CheckpointBlock& block = blocks[i];
    std::string block_header;
    AppendLittleEndian(block.tag, 4, &block_header);
    AppendLittleEndian(0, 4, &block_header);
    const absl::string_view payload = block.bytes();
    AppendLittleEndian(payload.size(), 8, &block_header);
    std::string checksum;
    AppendLittleEndian(BlockChecksum(block_header, payload), 8, &checksum);
    status = sink(block_header);
    if (status.ok()) status = sink(payload);
    if (status.ok()) status = sink(checksum);
  }
  return status;
}

}  // namespace

std::string EncodeCheckpointFile(const std::vector<CheckpointBlock>& blocks) {
  size_t total = kHeaderBytes;
  for (const CheckpointBlock& block : blocks) {
    total += kBlockHeaderBytes + block.bytes().size() + kChecksumBytes;
  }
  std::string out;
  out.reserve(total);
  EncodeInto(blocks, [&out](absl::string_view bytes) {
    out.append(bytes.data(), bytes.size());
    return absl::OkStatus();
  }).IgnoreError();
  return out;
}

absl::StatusOr<std::vector<CheckpointBlock>> DecodeCheckpointFile(absl::string_view bytes,
                                                                  absl::string_view name) {
  if (bytes.size() < kHeaderBytes || std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0) {
    return absl::DataLossError(
        absl::StrCat(name, ": not a checkpoint file (it does not begin with the format's magic)"));
  }
  const uint64_t version = ReadLittleEndian(bytes, sizeof(kMagic), 4);
  if (version != kCheckpointFormatVersion) {
    return absl::FailedPreconditionError(absl::StrCat(
        name, ": checkpoint format version ", version, "; this ps reads version ",
        kCheckpointFormatVersion, " (restore it with the release that wrote it)"));
  }
  const uint64_t count = ReadLittleEndian(bytes, sizeof(kMagic) + 4, 4);
  std::vector<CheckpointBlock> blocks;
  size_t offset = kHeaderBytes;
  for (uint64_t i = 0; i < count; ++i) {
    if (bytes.size() - offset < kBlockHeaderBytes) {
      return Corrupt(name, absl::StrCat("block ", i, " of ", count, " is missing"));
    }
    const absl::string_view header = bytes.substr(offset, kBlockHeaderBytes);
    const uint64_t length = ReadLittleEndian(bytes, offset + 8, 8);
    const size_t left = bytes.size() - offset - kBlockHeaderBytes;
    if (ReadLittleEndian(bytes, offset + 4, 4) != 0 || length > left ||
        left - length < kChecksumBytes) {
      return Corrupt(name, absl::StrCat("block ", i, " at byte ", offset, " is cut short or its "
                                        "header is damaged"));
    }
    const absl::string_view payload = bytes.substr(offset + kBlockHeaderBytes, length);
    const size_t checksum_at = offset + kBlockHeaderBytes + length;
    if (ReadLittleEndian(bytes, checksum_at, 8) != BlockChecksum(header, payload)) {
      return Corrupt(name, absl::StrCat("block ", i, " at byte ", offset,
                                        " does not match its checksum"));
    }
    blocks.push_back({static_cast<uint32_t>(ReadLittleEndian(bytes, offset, 4)),
                      std::string(payload)});
    offset = checksum_at + kChecksumBytes;
  }
  if (offset != bytes.size()) {
    return Corrupt(name, absl::StrCat(bytes.size() - offset, " bytes follow the last block"));
  }
  return blocks;
}

uint64_t CheckpointFileChecksum(absl::string_view bytes) {
  return XXH3_64bits(bytes.data(), bytes.size());
}

absl::StatusOr<CheckpointFileInfo> WriteCheckpointFile(FileSystem* fs, const std::string& path,
                                                       const std::vector<CheckpointBlock>& blocks) {
  // Block by block into the file: no copy of the whole file in memory.
  absl::StatusOr<std::unique_ptr<AtomicFile>> file = fs->NewAtomicFile(path);
  if (!file.ok()) return file.status();
  std::unique_ptr<XXH3_state_t, decltype(&XXH3_freeState)> state(XXH3_createState(),
                                                                 &XXH3_freeState);
  XXH3_64bits_reset(state.get());
  CheckpointFileInfo info;
  absl::Status status = EncodeInto(blocks, [&](absl::string_view bytes) {
    XXH3_64bits_update(state.get(), bytes.data(), bytes.size());
    info.bytes += static_cast<int64_t>(bytes.size());
    return (*file)->Append(bytes);
  });
  if (status.ok()) status = (*file)->Commit();
  if (!status.ok()) return status;
  info.checksum = XXH3_64bits_digest(state.get());
  return info;
}

absl::StatusOr<std::vector<CheckpointBlock>> ReadCheckpointFile(FileSystem* fs,
                                                                const std::string& path) {
  absl::StatusOr<std::string> bytes = fs->ReadFile(path);
  if (!bytes.ok()) return bytes.status();
  return DecodeCheckpointFile(*bytes, path);
}

}  // namespace ps
