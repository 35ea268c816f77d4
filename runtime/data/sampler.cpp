#include "data/sampler.h"

#include <algorithm>
#include <numeric>
#include <random>

#include "common/error.h"

namespace tp::data {

namespace {

using Samples = std::vector<std::size_t>;

// Every shard's samples, shard after shard, the shards in a seeded order (in their own without shuffling).
Samples shard_sequence(const SamplerOptions& options, std::mt19937_64& generator) {
  Samples first_sample(options.shard_sizes.size());
  std::size_t total = 0;
  for (std::size_t shard = 0; shard < options.shard_sizes.size(); ++shard) {
    first_sample[shard] = total;
    total += options.shard_sizes[shard];
  }
  if (total != options.dataset_size) {
    fail(ExitCode::internal, "sampler: the shards hold {} samples, the dataset {}", total, options.dataset_size);
  }
  Samples shards(options.shard_sizes.size());
  std::iota(shards.begin(), shards.end(), 0);
  if (options.shuffle) std::shuffle(shards.begin(), shards.end(), generator);
  Samples sequence;
  sequence.reserve(total);
  for (const std::size_t shard : shards) {
    for (std::size_t i = 0; i < options.shard_sizes[shard]; ++i) sequence.push_back(first_sample[shard] + i);
  }
  return sequence;
}

// Shuffled within consecutive blocks of `block`. Unlike WebDataset's buffer, where a sample may wait long and
// keep its shard needed, a block ends where it ends: the shards a reader needs at once are the one or two its
// block spans.
void shuffle_blocks(Samples::iterator begin, Samples::iterator end, std::size_t block, std::mt19937_64& generator) {
  block = std::max<std::size_t>(1, block);
  while (begin != end) {
    const auto block_end = begin + std::min<std::ptrdiff_t>(static_cast<std::ptrdiff_t>(block), end - begin);
    std::shuffle(begin, block_end, generator);
    begin = block_end;
  }
}

// How many of `samples` the ranks of `node` train: ranks_per_node per full round of world_size, and its
// ranks' part of the last round (which ranks 0, 1, ... take).
std::size_t node_share(std::size_t samples, const RankLayout& layout, int node) {
  const auto world = static_cast<std::size_t>(layout.world_size);
  const auto per_node = static_cast<std::size_t>(layout.ranks_per_node);
  const std::size_t before_node = static_cast<std::size_t>(node) * per_node;
  const std::size_t last_round = samples % world;
  return samples / world * per_node + std::min(per_node, last_round - std::min(last_round, before_node));
}

// `pool`, in shard-sequence order, as the layout's nodes read it: cut into one stretch per node, each
// shuffled in blocks, then dealt round by round (node 0's next ranks_per_node samples, node 1's...).
Samples node_order(const Samples& pool, const RankLayout& layout, const SamplerOptions& options,
                   std::mt19937_64& generator) {
  const int nodes = layout.world_size / layout.ranks_per_node;
  std::vector<Samples> stretches;
  auto next = pool.begin();
  for (int node = 0; node < nodes; ++node) {
    const auto end = next + static_cast<std::ptrdiff_t>(node_share(pool.size(), layout, node));
    stretches.emplace_back(next, end);
    if (options.shuffle) shuffle_blocks(stretches.back().begin(), stretches.back().end(), options.shuffle_buffer, generator);
    next = end;
  }
  Samples order;
  order.reserve(pool.size());
  const auto per_node = static_cast<std::size_t>(layout.ranks_per_node);
  for (std::size_t round = 0; order.size() < pool.size(); ++round) {
    for (const Samples& stretch : stretches) {
      const std::size_t from = std::min(stretch.size(), round * per_node);
      order.insert(order.end(), stretch.begin() + static_cast<std::ptrdiff_t>(from),
                   stretch.begin() + static_cast<std::ptrdiff_t>(std::min(stretch.size(), from + per_node)));
    }
  }
  return order;
}

void check_layouts(const std::vector<RankLayout>& layouts, std::size_t dataset_size) {
  for (std::size_t i = 0; i < layouts.size(); ++i) {
    const RankLayout& layout = layouts[i];
    const bool starts_right = i == 0 ? layout.from_sample == 0
                                     : layout.from_sample >= layouts[i - 1].from_sample && layout.from_sample <= dataset_size;
    if (!starts_right || layout.ranks_per_node < 1 || layout.world_size % layout.ranks_per_node != 0) {
      fail(ExitCode::internal, "sampler: layout {} (from sample {}, {} ranks in nodes of {}) does not follow", i,
           layout.from_sample, layout.world_size, layout.ranks_per_node);
    }
  }
}

// A fresh epoch's layouts: the options' own, from the start.
std::vector<RankLayout> one_layout(const SamplerOptions& options) {
  return {{0, options.world_size, options.ranks_per_node}};
}

// Packed shards: each stretch of the epoch dealt to its layout's nodes, what it left cut anew for the next.
Samples shard_order(const SamplerOptions& options, const std::vector<RankLayout>& layouts, std::mt19937_64& generator) {
  check_layouts(layouts, options.dataset_size);
  const Samples sequence = shard_sequence(options, generator);
  Samples order;
  order.reserve(sequence.size());
  Samples pool = sequence;
  for (std::size_t i = 0; i < layouts.size(); ++i) {
    const Samples stretch = node_order(pool, layouts[i], options, generator);
    const std::size_t end = i + 1 < layouts.size() ? layouts[i + 1].from_sample : sequence.size();
    const auto taken = stretch.begin() + static_cast<std::ptrdiff_t>(end - layouts[i].from_sample);
    order.insert(order.end(), stretch.begin(), taken);
    // What is left, in the shard sequence's order, for the next layout's nodes.
    std::vector<bool> left(sequence.size(), false);
    for (auto sample = taken; sample != stretch.end(); ++sample) left[*sample] = true;
    pool.clear();
    for (const std::size_t sample : sequence) {
      if (left[sample]) pool.push_back(sample);
    }
  }
  return order;
}

}  // namespace

std::vector<std::size_t> epoch_order(const SamplerOptions& options, std::int64_t epoch,
                                     const std::vector<RankLayout>& layouts) {
  // Same (seed, epoch) on every rank gives the same order.
  std::mt19937_64 generator(options.seed * 1000003ULL + static_cast<std::uint64_t>(epoch));
  if (!options.shard_sizes.empty()) return shard_order(options, layouts.empty() ? one_layout(options) : layouts, generator);
  Samples order(options.dataset_size);
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

std::vector<std::size_t> DistributedSampler::indices(std::int64_t epoch, std::size_t first_sample,
                                                     const std::vector<RankLayout>& layouts) const {
  if (!layouts.empty() && (layouts.back().world_size != options_.world_size ||
                           layouts.back().ranks_per_node != options_.ranks_per_node ||
                           layouts.back().from_sample > first_sample)) {
    fail(ExitCode::internal, "sampler: the epoch's last layout ({} ranks in nodes of {} from sample {}) is not this "
         "job's ({} in nodes of {} from {})", layouts.back().world_size, layouts.back().ranks_per_node,
         layouts.back().from_sample, options_.world_size, options_.ranks_per_node, first_sample);
  }
  const std::vector<std::size_t> order = epoch_order(options_, epoch, layouts);
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
