// The project's random numbers: initial values on the ps, synthetic data sets, per-epoch
// shuffles. Written out here rather than taken from <random>, whose distributions differ between
// standard libraries, so that a job starts from the same values and data on every machine.
#ifndef PS_COMMON_RANDOM_H_
#define PS_COMMON_RANDOM_H_

#include <cmath>
#include <cstdint>

namespace ps {
// SplitMix64's output function (Steele, Lea and Flood 2014): a bijective 64-bit mixer.
inline uint64_t Mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

// A seed for the independent stream `(stream, index)` of the job seed `seed`.
inline uint64_t StreamSeed(uint64_t seed, uint64_t stream, uint64_t index) {
  return Mix64(Mix64(Mix64(seed) ^ stream) ^ index);
}

// SplitMix64 with uniform, normal and bounded-integer draws. Not thread-safe.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}

  uint64_t Next() {
    state_ += 0x9e3779b97f4a7c15ULL;
    return Mix64(state_);
  }

  // Uniform on [0, 1), 53 random bits.
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }

  // Uniform on {0, ..., n - 1}, without modulo bias. REQUIRES: n >= 1.
  uint64_t Below(uint64_t n) {
    const uint64_t threshold = (0 - n) % n;  // 2^64 mod n: the draws below it are rejected.
    uint64_t draw = Next();
    while (draw < threshold) draw = Next();
    return draw % n;
  }

  // N(0, 1) by the Box-Muller transform; the second value of each pair is kept for the next call.
  double Normal() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    constexpr double kTwoPi = 6.283185307179586476925286766559;
    const double u1 = 1 - Uniform();  // In (0, 1], so the log is finite.
    const double u2 = Uniform();
    const double radius = std::sqrt(-2 * std::log(u1));
    spare_ = radius * std::sin(kTwoPi * u2);
    has_spare_ = true;
    return radius * std::cos(kTwoPi * u2);
  }

 private:
  uint64_t state_;
  bool has_spare_ = false;
  double spare_ = 0;
};

}  // namespace ps

#endif  // PS_COMMON_RANDOM_H_
