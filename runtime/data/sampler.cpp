#include "data/sampler.h"

#include <algorithm>
#include <numeric>
#include <random>

#include "common/error.h"

namespace tp::data {

namespace {

// Shards in a seeded order, each one's samples in order, each sample placed at random in a buffer of `buffer`
// samples whose previous occupant goes next (the buffer starts full); then the buffer's rest, in random order.
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
  std::vector<std::size_t> buffer;
  buffer.reserve(options.shuffle ? options.shuffle_buffer : 0);
  for (const std::size_t shard : shards) {
    for (std::size_t i = 0; i < options.shard_sizes[shard]; ++i) {
      const std::size_t sample = first_sample[shard] + i;
      if (!options.shuffle) {
        order.push_back(sample);
      } else if (buffer.size() < options.shuffle_buffer) {
        buffer.push_back(sample);
      } else {
        std::size_t& slot = buffer[std::uniform_int_distribution<std::size_t>(0, buffer.size() - 1)(generator)];
        order.push_back(slot);
        slot = sample;
      }
    }
  }
  std::shuffle(buffer.begin(), buffer.end(), generator);
  order.insert(order.end(), buffer.begin(), buffer.end());
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
