// One epoch of trainpoint's data loader over an image folder, or one rank's share of packed shards (--shards:
// a local directory or s3://, streamed as training streams them), with ImageNet-style training transforms
// (random resized crop, flip, normalize), printing one JSON line: images, seconds, seconds to the first batch,
// CPU seconds, peak resident memory and the disk its shard cache held at the end.
// A job of several nodes is simulated on one machine by starting one process per rank with --nodes N
// --ranks-per-node L and its --rank (global: node x L + local rank): each gets the placement a pod of that job
// has (topology nnodes, node_rank, nproc_per_node, rank, local_rank), the sampler its ranks_per_node, and the
// ranks of one node the same --workdir (their node's shard cache lives under it), the nodes different ones.
#include <torch/torch.h>

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cxxopts.hpp>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <numeric>
#include <thread>
#include <type_traits>
#include <utility>

#include "common/error.h"
#include "common/memory.h"
#include "data/dataset.h"
#include "data/loader.h"
#include "data/sampler.h"
#include "storage/data_source.h"
#include "measure/cpu_time.h"

namespace {

// The sampler's ranks_per_node (the epoch order that deals shards to nodes), where this build's
// tp::data::SamplerOptions has it: false where it does not, and the order is the one of a single node.
template <typename Options, typename = void>
struct HasRanksPerNode : std::false_type {};
template <typename Options>
struct HasRanksPerNode<Options, std::void_t<decltype(std::declval<Options&>().ranks_per_node)>> : std::true_type {};

template <typename Options>
bool set_ranks_per_node(Options& options, int ranks_per_node) {
  if constexpr (HasRanksPerNode<Options>::value) {
    options.ranks_per_node = ranks_per_node;
    return true;
  } else {
    (void)options;
    (void)ranks_per_node;
    return false;
  }
}

// --start-barrier DIR: this rank's file DIR/ready-RANK, then a wait until the world's ranks have all made theirs,
// so that the ranks of a simulated job start their clocks together, each after its own start-up (as
// bench/shards/load.py does after Python's imports). False after 10 minutes without them.
bool start_barrier(const std::filesystem::path& dir, int rank, int world_size) {
  std::filesystem::create_directories(dir);
  std::ofstream(dir / fmt::format("ready-{}", rank)).put('\n');
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(10);
  while (std::chrono::steady_clock::now() < deadline) {
    int ready = 0;
    std::error_code ignored;
    for (const auto& entry : std::filesystem::directory_iterator(dir, ignored)) {
      if (entry.path().filename().string().rfind("ready-", 0) == 0) ++ready;
    }
    if (ready >= world_size) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  cxxopts::Options options("tp-bench-data", "trainpoint's loader: one epoch over an image folder");
  options.add_options()("dir", "image folder", cxxopts::value<std::string>())(
      "workers", "decoding threads", cxxopts::value<int>()->default_value("2"))(
      "batch", "batch size", cxxopts::value<int>()->default_value("64"))(
      "size", "output image size", cxxopts::value<int>()->default_value("224"))(
      "shards", "packed shards (trainpoint pack) instead of DIR: a directory or s3://bucket/prefix",
      cxxopts::value<std::string>())("rank", "--shards: this rank", cxxopts::value<int>()->default_value("0"))(
      "world-size", "--shards: the ranks (default: nodes x ranks per node)", cxxopts::value<int>())(
      "nodes", "--shards: the job's nodes (pods), simulated on this machine", cxxopts::value<int>()->default_value("1"))(
      "ranks-per-node", "--shards: the ranks of each node (their local ranks: rank % this)",
      cxxopts::value<int>())("local-world-size", "--ranks-per-node", cxxopts::value<int>())(
      "shuffle-buffer", "--shards: data.shuffle_buffer", cxxopts::value<int>()->default_value("10000"))(
      "cache-mb", "--shards from S3: data.stream_cache_mb", cxxopts::value<int>()->default_value("4096"))(
      "workdir", "--shards: where the shard cache goes: the node's (its ranks give the same one)",
      cxxopts::value<std::string>()->default_value("/tmp/tp-bench-data-work"))(
      "start-barrier", "--shards: a directory where the ranks wait for each other before the clock starts",
      cxxopts::value<std::string>());
  options.parse_positional({"dir"});
  try {
    const auto args = options.parse(argc, argv);
    if (!args.count("dir") && !args.count("shards")) {
      std::cerr << options.help();
      return 2;
    }
    at::set_num_threads(1);  // the workers are the only parallelism, as in torchvision's DataLoader
    tp::keep_freed_memory();  // as the trainer's process does
    const bool shards = args.count("shards") > 0;
    const int rank = args["rank"].as<int>();
    const int nodes = args["nodes"].as<int>();
    const int ranks_per_node = args.count("ranks-per-node")     ? args["ranks-per-node"].as<int>()
                               : args.count("local-world-size") ? args["local-world-size"].as<int>()
                               : args.count("world-size")       ? args["world-size"].as<int>() / std::max(nodes, 1)
                                                                : 1;
    const int world_size = args.count("world-size") ? args["world-size"].as<int>() : nodes * ranks_per_node;
    if (nodes < 1 || ranks_per_node < 1 || world_size != nodes * ranks_per_node || rank < 0 || rank >= world_size) {
      std::cerr << fmt::format("tp-bench-data: --rank {} of --world-size {} in --nodes {} x --ranks-per-node {}: the "
                               "world is nodes x ranks per node, and the rank within it\n",
                               rank, world_size, nodes, ranks_per_node);
      return 2;
    }
    const int node = rank / ranks_per_node;
    const int local_rank = rank % ranks_per_node;
    tp::spec::DataSpec spec{};
    spec.source = shards ? args["shards"].as<std::string>() : args["dir"].as<std::string>();
    spec.format = shards ? tp::spec::DataFormat::shards : tp::spec::DataFormat::image_folder;
    spec.shuffle_buffer = args["shuffle-buffer"].as<int>();
    spec.stream_cache_mb = args["cache-mb"].as<int>();
    spec.valid = 0;
    spec.image_size = args["size"].as<int>();
    spec.channels = 3;
    spec.task = tp::spec::Task::classification;
    spec.augment = {"random_resized_crop", "flip"};
    spec.resize = "crop";
    spec.normalize = "imagenet";
    spec.max_bad_files = 0;

    if (args.count("start-barrier") && !start_barrier(args["start-barrier"].as<std::string>(), rank, world_size)) {
      std::cerr << "tp-bench-data: the other ranks did not reach --start-barrier within 10 minutes\n";
      return 1;
    }
    // Timed from before the data is opened: listing S3 and fetching the index count towards the first batch.
    const double cpu_start = tp::bench::process_cpu_seconds();
    const auto start = std::chrono::steady_clock::now();
    tp::storage::Placement placement;
    placement.workdir = args["workdir"].as<std::string>();
    placement.topology.nnodes = nodes;
    placement.topology.node_rank = node;
    placement.topology.nproc_per_node = ranks_per_node;
    placement.topology.rank = rank;
    placement.topology.local_rank = local_rank;
    placement.rank = rank;
    const tp::data::Datasets data = tp::storage::open_data(spec, std::filesystem::current_path(), placement, 1);
    tp::data::SamplerOptions sampling;
    sampling.dataset_size = data.train->size();
    sampling.rank = rank;
    sampling.world_size = world_size;
    sampling.shuffle = true;
    sampling.drop_last = false;
    sampling.seed = 1;
    sampling.shard_sizes = data.train_shard_sizes;
    sampling.shuffle_buffer = static_cast<std::size_t>(spec.shuffle_buffer);
    const bool node_order = set_ranks_per_node(sampling, ranks_per_node);
    const tp::data::DistributedSampler sampler(sampling);
    tp::data::Loader loader(data.train, sampler.indices(0), 0, {args["batch"].as<int>(), args["workers"].as<int>()});
    std::int64_t images = 0;
    double checksum = 0;
    double first_batch = 0;
    while (auto batch = loader.next()) {
      if (images == 0) first_batch = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      images += batch->inputs.size(0);
      checksum += batch->inputs[0][0][0][0].item<float>();
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::uint64_t cache_bytes = 0;
    std::error_code ignored;
    for (const auto& entry : std::filesystem::recursive_directory_iterator(placement.workdir, ignored)) {
      if (entry.is_regular_file(ignored)) cache_bytes += entry.file_size(ignored);
    }
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    std::cout << fmt::format(
        "{{\"loader\": \"trainpoint\", \"workers\": {}, \"rank\": {}, \"world_size\": {}, \"node\": {}, "
        "\"local_rank\": {}, \"nodes\": {}, \"ranks_per_node\": {}, \"node_order\": {}, \"images\": {}, "
        "\"seconds\": {:.3f}, \"first_batch_s\": {:.3f}, \"cpu_seconds\": {:.3f}, \"peak_rss_mb\": {:.1f}, "
        "\"disk_mb\": {:.1f}, \"checksum\": {:.3f}}}\n",
        args["workers"].as<int>(), rank, world_size, node, local_rank, nodes, ranks_per_node, node_order, images,
        seconds, first_batch,
        tp::bench::process_cpu_seconds() - cpu_start, static_cast<double>(usage.ru_maxrss) / 1024,
        static_cast<double>(cache_bytes) / (1 << 20), checksum);
  } catch (const tp::Error& error) {
    std::cerr << "tp-bench-data: " << error.what() << "\n";
    return static_cast<int>(error.code());
  }
  return 0;
}
