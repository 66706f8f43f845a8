// The software's version, recorded in every results directory (job.json).
#ifndef PS_COMMON_PROCESS_VERSION_H_
#define PS_COMMON_PROCESS_VERSION_H_

namespace ps {

inline constexpr char kVersion[] = "0.1.0";

}  // namespace ps

#endif  // PS_COMMON_PROCESS_VERSION_H_
