#include "data/sampler.h"

#include <algorithm>
#include <numeric>
#include <random>

#include "common/error.h"

namespace tp::data {

namespace {

// Shards in a seeded order, each one's samples in order, shuffled within consecutive blocks of
// `shuffle_buffer`. Unlike WebDataset's buffer, where a sample may wait long and keep its shard needed, a block
// ends where it ends: the shards a reader needs at once are the one or two its block spans.
std::vector<std::size_t> shard_order(const SamplerOptions& options, std::mt19937_64& generator) {
  std::vector<std::size_t> first_sample(options.shard_sizes.size());
  std::size_t total = 0;
  for (std::size_t shard = 0; shard < options.shard_sizes.size(); ++shard) {
    first_sample[shard] = total;
    total += options.shard_sizes[shard];
  }
  if (total != options.dataset_size) {
    fail(ExitCode::internal, "sampler: the shards hold {} samples, the dataset {}", total, options.dataset_size);
  }
  std::vector<std::size_t> shards(options.shard_sizes.size());
  std::iota(shards.begin(), shards.end(), 0);
  if (options.shuffle) std::shuffle(shards.begin(), shards.end(), generator);
  std::vector<std::size_t> order;
  order.reserve(total);
  for (const std::size_t shard : shards) {
    for (std::size_t i = 0; i < options.shard_sizes[shard]; ++i) order.push_back(first_sample[shard] + i);
  }
  if (options.shuffle) {
    const std::size_t block = std::max<std::size_t>(1, options.shuffle_buffer);
    for (std::size_t start = 0; start < order.size(); start += block) {
      const auto begin = order.begin() + static_cast<std::ptrdiff_t>(start);
      std::shuffle(begin, begin + static_cast<std::ptrdiff_t>(std::min(block, order.size() - start)), generator);
    }
  }
  return order;
}

}  // namespace

std::vector<std::size_t> epoch_order(const SamplerOptions& options, std::int64_t epoch) {
  // Same (seed, epoch) on every rank gives the same order.
  std::mt19937_64 generator(options.seed * 1000003ULL + static_cast<std::uint64_t>(epoch));
  if (!options.shard_sizes.empty()) return shard_order(options, generator);
  std::vector<std::size_t> order(options.dataset_size);
  std::iota(order.begin(), order.end(), 0);
  if (options.shuffle) std::shuffle(order.begin(), order.end(), generator);
  return order;
}

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
  const std::vector<std::size_t> order = epoch_order(options_, epoch);
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
