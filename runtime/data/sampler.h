// Which samples each rank sees in an epoch, with torch.utils.data.DistributedSampler's properties:
// every rank gets the same number of samples (padded by repeating from the start, or the remainder
// dropped), shares are disjoint apart from that padding, and the order is reshuffled each epoch
// from (seed, epoch) alone, so every rank computes the same permutation without communicating.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tp::data {

struct SamplerOptions {
  std::size_t dataset_size = 0;
  int rank = 0;
  int world_size = 1;
  bool shuffle = true;
  bool drop_last = false;  // drop the tail instead of padding it
  std::uint64_t seed = 0;
};

class DistributedSampler {
 public:
  explicit DistributedSampler(SamplerOptions options);
  // This rank's sample indices for `epoch`, in order.
  std::vector<std::size_t> indices(std::int64_t epoch) const;
  std::size_t samples_per_rank() const { return per_rank_; }

 private:
  SamplerOptions options_;
  std::size_t per_rank_;
};

}  // namespace tp::data
