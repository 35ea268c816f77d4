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
}

std::size_t DistributedSampler::samples_per_rank(std::size_t first_sample) const {
  const std::size_t world = static_cast<std::size_t>(options_.world_size);
  const std::size_t remaining = options_.dataset_size - std::min(first_sample, options_.dataset_size);
  return options_.drop_last ? remaining / world : (remaining + world - 1) / world;
}

std::vector<std::size_t> DistributedSampler::indices(std::int64_t epoch, std::size_t first_sample) const {
  std::vector<std::size_t> order(options_.dataset_size);
  std::iota(order.begin(), order.end(), 0);
  if (options_.shuffle) {
    // Same (seed, epoch) on every rank gives the same permutation.
    std::mt19937_64 generator(options_.seed * 1000003ULL + static_cast<std::uint64_t>(epoch));
    std::shuffle(order.begin(), order.end(), generator);
  }
  if (order.empty()) return {};
  const std::size_t world = static_cast<std::size_t>(options_.world_size);
  const std::size_t per_rank = samples_per_rank(first_sample);
  // The rest of the order, padded by repeating from the epoch's start (possibly several times for tiny
  // datasets), or truncated. From the first sample this is DistributedSampler's padding.
  std::vector<std::size_t> rest(order.begin() + static_cast<std::ptrdiff_t>(std::min(first_sample, order.size())),
                                order.end());
  for (std::size_t i = 0; rest.size() < per_rank * world; ++i) rest.push_back(order[i % order.size()]);
  rest.resize(per_rank * world);
  std::vector<std::size_t> mine;
  mine.reserve(per_rank);
  for (std::size_t i = static_cast<std::size_t>(options_.rank); i < rest.size(); i += world) mine.push_back(rest[i]);
  return mine;
}

}  // namespace tp::data
