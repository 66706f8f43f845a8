#include "ctl/export/safetensors.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <set>
#include <tuple>
#include <utility>

#include <nlohmann/json.hpp>

#include "absl/base/config.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "common/json_text.h"

// The data section is the tensors' memory as is, which is little-endian IEEE-754 float32 on the
// hosts we build for; a big-endian host would need a byte-swapping copy both ways.
#ifndef ABSL_IS_LITTLE_ENDIAN
#error "safetensors writes tensor memory as is, so it requires a little-endian host"
#endif
static_assert(sizeof(float) == 4 && std::numeric_limits<float>::is_iec559,
              "safetensors F32 requires IEEE-754 float32");

namespace ps {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

constexpr char kMetadataKey[] = "__metadata__";

bool IsUtf8(const std::string& text) {
  try {
    json(text).dump();  // nlohmann refuses to write invalid UTF-8.
    return true;
  } catch (const json::type_error&) {
    return false;
  }
}

// The product of `shape` (dimensions >= 0), or nullopt when it exceeds `limit`.
std::optional<uint64_t> ElementCount(const std::vector<int64_t>& shape, uint64_t limit) {
  if (std::find(shape.begin(), shape.end(), 0) != shape.end()) return 0;
  uint64_t count = 1;
  for (int64_t dim : shape) {
    if (static_cast<uint64_t>(dim) > limit / count) return std::nullopt;
    count *= static_cast<uint64_t>(dim);
  }
  return count;
}

std::string ShapeText(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

absl::Status InvalidTensor(const std::string& path, const std::string& name,
                           absl::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat(path, ": cannot write tensor \"", name, "\": ", what, "; nothing written"));
}

absl::Status CheckTensor(const std::string& path, const SafetensorsTensor& tensor) {
  if (tensor.name.empty()) return InvalidTensor(path, "", "the name is empty: give it one");
  if (tensor.name == kMetadataKey) {
    return InvalidTensor(path, tensor.name, "the name is reserved for the metadata: rename it");
  }
  if (!IsUtf8(tensor.name)) {
    return InvalidTensor(path, tensor.name, "the name is not valid UTF-8");
  }
  for (int64_t dim : tensor.shape) {
    if (dim < 0) {
      return InvalidTensor(
          path, tensor.name,
          absl::StrCat("shape ", ShapeText(tensor.shape), " has a negative dimension"));
    }
  }
  if (ElementCount(tensor.shape, tensor.values.size()) != tensor.values.size()) {
    return InvalidTensor(path, tensor.name,
                         absl::StrCat("shape ", ShapeText(tensor.shape), " does not hold the ",
                                      tensor.values.size(), " values given"));
  }
  return absl::OkStatus();
}

void AppendLittleEndian64(uint64_t value, std::string* out) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

absl::Status Corrupt(const std::string& path, absl::string_view what) {
  return absl::DataLossError(
      absl::StrCat(path, ": not a valid safetensors file: ", what,
                   "; the file was truncated or changed after it was written (write it again)"));
}

// Where a tensor's bytes lie in the data section.
struct Extent {
  uint64_t begin;
  uint64_t end;
  std::string name;
};

// Checks one header entry and reads its shape and extent; the values are read once every
// entry's extent is known to be sound.
absl::Status ParseTensorInfo(const std::string& path, const std::string& name, const json& info,
                             uint64_t data_size, SafetensorsEntry* entry, Extent* extent) {
  const std::string prefix = absl::StrCat("tensor \"", name, "\"");
  if (!info.is_object()) {
    return Corrupt(path, absl::StrCat(prefix, " is ", info.dump(), ", not an object"));
  }
  auto dtype = info.find("dtype");
  if (dtype == info.end() || !dtype->is_string()) {
    return Corrupt(path, absl::StrCat(prefix, " has no \"dtype\" string"));
  }
  if (*dtype != "F32") {
    return absl::DataLossError(
        absl::StrCat(path, ": tensor \"", name, "\" has dtype ", dtype->dump(),
                     ", but ReadSafetensors reads F32 only: save the tensors as float32"));
  }
  auto shape = info.find("shape");
  if (shape == info.end() || !shape->is_array()) {
    return Corrupt(path, absl::StrCat(prefix, " has no \"shape\" array"));
  }
  for (const json& dim : *shape) {
    if (!dim.is_number_unsigned() ||
        dim.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return Corrupt(path, absl::StrCat(prefix, " has shape ", shape->dump(),
                                        ", not a list of non-negative integers"));
    }
    entry->shape.push_back(dim.get<int64_t>());
  }
  auto offsets = info.find("data_offsets");
  if (offsets == info.end() || !offsets->is_array() || offsets->size() != 2 ||
      !(*offsets)[0].is_number_unsigned() || !(*offsets)[1].is_number_unsigned()) {
    return Corrupt(path, absl::StrCat(prefix, " has no \"data_offsets\" pair [begin, end]"));
  }
  extent->begin = (*offsets)[0].get<uint64_t>();
  extent->end = (*offsets)[1].get<uint64_t>();
  extent->name = name;
  if (extent->begin > extent->end) {
    return Corrupt(path, absl::StrCat(prefix, " has data_offsets ", offsets->dump(),
                                      ", which end before they begin"));
  }
  if (extent->end > data_size) {
    return Corrupt(path, absl::StrCat(prefix, " has data_offsets ", offsets->dump(),
                                      " outside the data section's ", data_size, " bytes"));
  }
  const uint64_t bytes = extent->end - extent->begin;
  if (ElementCount(entry->shape, bytes / sizeof(float)) != bytes / sizeof(float) ||
      bytes % sizeof(float) != 0) {
    return Corrupt(path,
                   absl::StrCat(prefix, " has data_offsets ", offsets->dump(), " (", bytes,
                                " bytes), which do not hold shape ", shape->dump(), " of float32"));
  }
  return absl::OkStatus();
}

absl::Status ParseMetadata(const std::string& path, const json& value,
                           std::map<std::string, std::string>* metadata) {
  if (!value.is_object()) {
    return Corrupt(path, "\"__metadata__\" is not an object of strings to strings");
  }
  for (const auto& [key, text] : value.items()) {
    if (!text.is_string()) {
      return Corrupt(path, absl::StrCat("\"__metadata__\" holds ", text.dump(), " for \"", key,
                                        "\", not a string"));
    }
    (*metadata)[key] = text.get<std::string>();
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status WriteSafetensors(const std::string& path,
                              const std::vector<SafetensorsTensor>& tensors,
                              const std::map<std::string, std::string>& metadata, FileSystem* fs) {
  for (const auto& [key, value] : metadata) {
    if (!IsUtf8(key) || !IsUtf8(value)) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": cannot write metadata entry \"", key,
                                                     "\": it is not valid UTF-8; nothing written"));
    }
  }
  // The header is built an entry at a time: nlohmann's ordered object finds keys by a linear
  // search, too slow for models of thousands of tensors.
  std::vector<std::string> entries;
  if (!metadata.empty()) {
    entries.push_back(absl::StrCat("\"", kMetadataKey, "\":", json(metadata).dump()));
  }
  std::set<absl::string_view> names;
  uint64_t offset = 0;
  for (const SafetensorsTensor& tensor : tensors) {
    absl::Status status = CheckTensor(path, tensor);
    if (!status.ok()) return status;
    if (!names.insert(tensor.name).second) {
      return InvalidTensor(path, tensor.name, "the name is given twice: names must be unique");
    }
    const uint64_t end = offset + tensor.values.size() * sizeof(float);
    ordered_json info = ordered_json::object();
    info["dtype"] = "F32";
    info["shape"] = tensor.shape;
    info["data_offsets"] = {offset, end};
    entries.push_back(absl::StrCat(json(tensor.name).dump(), ":", info.dump()));
    offset = end;
  }
  std::string text = absl::StrCat("{", absl::StrJoin(entries, ","), "}");
  text.append((8 - text.size() % 8) % 8, ' ');  // 8 + N, a multiple of 8.
  std::string head;
  AppendLittleEndian64(text.size(), &head);
  head += text;

  absl::StatusOr<std::unique_ptr<AtomicFile>> file = fs->NewAtomicFile(path);
  if (!file.ok()) return file.status();
  absl::Status status = (*file)->Append(head);
  for (size_t i = 0; status.ok() && i < tensors.size(); ++i) {
    absl::Span<const float> values = tensors[i].values;
    if (values.empty()) continue;
    status = (*file)->Append(absl::string_view(reinterpret_cast<const char*>(values.data()),
                                               values.size() * sizeof(float)));
  }
  return status.ok() ? (*file)->Commit() : status;  // Uncommitted, the file is removed.
}

absl::StatusOr<std::map<std::string, SafetensorsEntry>> ReadSafetensors(
    const std::string& path, std::map<std::string, std::string>* metadata, FileSystem* fs) {
  absl::StatusOr<std::string> bytes = fs->ReadFile(path);
  if (!bytes.ok()) return bytes.status();
  if (bytes->size() < 8) {
    return Corrupt(path, absl::StrCat("it has ", bytes->size(),
                                      " bytes, fewer than the header's 8-byte length"));
  }
  uint64_t header_size = 0;
  for (int i = 0; i < 8; ++i) {
    header_size |= static_cast<uint64_t>(static_cast<unsigned char>((*bytes)[i])) << (8 * i);
  }
  if (header_size > bytes->size() - 8) {
    return Corrupt(
        path, absl::StrCat("the header's length ", header_size, " runs past the end of the file (",
                           bytes->size(), " bytes)"));
  }
  const absl::string_view header_text(bytes->data() + 8, header_size);
  const absl::string_view data = absl::string_view(*bytes).substr(8 + header_size);
  absl::StatusOr<json> parsed_header = ParseJsonText(header_text);
  if (!parsed_header.ok()) {
    return Corrupt(path,
                   absl::StrCat("the header is not JSON (", parsed_header.status().message(), ")"));
  }
  const json& header = *parsed_header;
  if (!header.is_object()) return Corrupt(path, "the header is not a JSON object");

  std::map<std::string, SafetensorsEntry> tensors;
  std::map<std::string, std::string> read_metadata;
  std::vector<Extent> extents;
  for (const auto& [name, info] : header.items()) {
    absl::Status status;
    if (name == kMetadataKey) {
      status = ParseMetadata(path, info, &read_metadata);
    } else {
      extents.emplace_back();
      status = ParseTensorInfo(path, name, info, data.size(), &tensors[name], &extents.back());
    }
    if (!status.ok()) return status;
  }
  // The tensors must cover the data section exactly, one after another.
  std::sort(extents.begin(), extents.end(), [](const Extent& a, const Extent& b) {
    return std::tie(a.begin, a.end) < std::tie(b.begin, b.end);
  });
  uint64_t covered = 0;
  for (size_t i = 0; i < extents.size(); ++i) {
    const Extent& extent = extents[i];
    if (extent.begin < covered) {
      return Corrupt(path, absl::StrCat("tensors \"", extents[i - 1].name, "\" and \"", extent.name,
                                        "\" overlap in the data section"));
    }
    if (extent.begin > covered) {
      return Corrupt(path, absl::StrCat("bytes ", covered, " to ", extent.begin,
                                        " of the data section belong to no tensor"));
    }
    covered = extent.end;
    SafetensorsEntry& entry = tensors[extent.name];
    entry.values.resize((extent.end - extent.begin) / sizeof(float));
    if (!entry.values.empty()) {
      std::memcpy(entry.values.data(), data.data() + extent.begin, extent.end - extent.begin);
    }
  }
  if (covered != data.size()) {
    return Corrupt(path, absl::StrCat("the data section has ", data.size(),
                                      " bytes but its tensors end at byte ", covered));
  }
  if (metadata != nullptr) *metadata = std::move(read_metadata);
  return tensors;
}

}  // namespace ps
