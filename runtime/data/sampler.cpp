#include "data/sampler.h"

#include <algorithm>
#include <numeric>
#include <random>

#include "common/error.h"

namespace tp::data {

DistributedSampler::DistributedSampler(SamplerOptions options) : options_(options) {
  if (options_.world_size < 1 || options_.rank < 0 || options_.rank >= options_.world_size) {
    fail(ExitCode::internal, "sampler: rank {} is outside world size {}", options_.rank, options_.world_size);
  }
  const std::size_t world = static_cast<std::size_t>(options_.world_size);
  per_rank_ =
      options_.drop_last ? options_.dataset_size / world : (options_.dataset_size + world - 1) / world;
}

std::vector<std::size_t> DistributedSampler::indices(std::int64_t epoch) const {
  std::vector<std::size_t> order(options_.dataset_size);
  std::iota(order.begin(), order.end(), 0);
  if (options_.shuffle) {
    // Same (seed, epoch) on every rank gives the same permutation.
    std::mt19937_64 generator(options_.seed * 1000003ULL + static_cast<std::uint64_t>(epoch));
    std::shuffle(order.begin(), order.end(), generator);
  }
  const std::size_t world = static_cast<std::size_t>(options_.world_size);
  const std::size_t total = per_rank_ * world;
  if (order.empty()) return {};
  // Pad by repeating from the start (possibly several times for tiny datasets), or truncate.
  for (std::size_t i = 0; order.size() < total; ++i) order.push_back(order[i]);
  order.resize(total);
  std::vector<std::size_t> mine;
  mine.reserve(per_rank_);
  for (std::size_t i = static_cast<std::size_t>(options_.rank); i < total; i += world)
    mine.push_back(order[i]);
  return mine;
}

}  // namespace tp::data
