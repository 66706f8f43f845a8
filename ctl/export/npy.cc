#include "ctl/export/npy.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace ps {

absl::Status WriteNpy(const std::string& path, const std::vector<int64_t>& shape,
                      absl::Span<const float> values, FileSystem* fs) {
  std::string shape_text = absl::StrJoin(shape, ", ");
  if (shape.size() == 1) shape_text += ",";
  std::string header = absl::StrCat("{'descr': '<f4', 'fortran_order': False, 'shape': (",
                                    shape_text, "), }");
  // Magic (6) + version (2) + header length (2) + header + '\n', padded to a multiple of 64.
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header.push_back('\n');
  uint16_t length = static_cast<uint16_t>(header.size());
  std::string bytes("\x93NUMPY\x01\x00", 8);
  bytes.push_back(static_cast<char>(length & 0xff));
  bytes.push_back(static_cast<char>(length >> 8));
  bytes += header;
  bytes.append(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
  return fs->WriteFileAtomically(path, bytes);
}

}  // namespace ps
