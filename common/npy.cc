#include "common/npy.h"

#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace ps {

absl::Status WriteNpy(const std::string& path, const std::vector<int64_t>& shape,
                      absl::Span<const float> values) {
  std::string shape_text = absl::StrJoin(shape, ", ");
  if (shape.size() == 1) shape_text += ",";
  std::string header = absl::StrCat("{'descr': '<f4', 'fortran_order': False, 'shape': (",
                                    shape_text, "), }");
  // Magic (6) + version (2) + header length (2) + header + '\n', padded to a multiple of 64.
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header.push_back('\n');
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  if (!file) return absl::PermissionDeniedError(absl::StrCat("cannot write ", path));
  file.write("\x93NUMPY\x01\x00", 8);
  uint16_t length = static_cast<uint16_t>(header.size());
  char length_bytes[2] = {static_cast<char>(length & 0xff), static_cast<char>(length >> 8)};
  file.write(length_bytes, 2);
  file.write(header.data(), static_cast<std::streamsize>(header.size()));
  file.write(reinterpret_cast<const char*>(values.data()),
             static_cast<std::streamsize>(values.size() * sizeof(float)));
  if (!file) return absl::DataLossError(absl::StrCat("writing ", path, " failed"));
  return absl::OkStatus();
}

}  // namespace ps
