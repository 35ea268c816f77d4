// One epoch of trainpoint's data loader over an image folder, or one rank's share of packed shards (--shards:
// a local directory or s3://, streamed as training streams them), with ImageNet-style training transforms
// (random resized crop, flip, normalize), printing one JSON line: images, seconds, seconds to the first batch,
// CPU seconds, peak resident memory and the disk its shard cache held at the end.
#include <torch/torch.h>

#include <sys/resource.h>

#include <chrono>
#include <cxxopts.hpp>
#include <filesystem>
#include <iostream>
#include <numeric>

#include "common/error.h"
#include "common/memory.h"
#include "data/dataset.h"
#include "data/loader.h"
#include "data/sampler.h"
#include "storage/data_source.h"
#include "measure/cpu_time.h"

int main(int argc, char** argv) {
  cxxopts::Options options("tp-bench-data", "trainpoint's loader: one epoch over an image folder");
  options.add_options()("dir", "image folder", cxxopts::value<std::string>())(
      "workers", "decoding threads", cxxopts::value<int>()->default_value("2"))(
      "batch", "batch size", cxxopts::value<int>()->default_value("64"))(
      "size", "output image size", cxxopts::value<int>()->default_value("224"))(
      "shards", "packed shards (trainpoint pack) instead of DIR: a directory or s3://bucket/prefix",
      cxxopts::value<std::string>())("rank", "--shards: this rank", cxxopts::value<int>()->default_value("0"))(
      "world-size", "--shards: the ranks", cxxopts::value<int>()->default_value("1"))(
      "shuffle-buffer", "--shards: data.shuffle_buffer", cxxopts::value<int>()->default_value("10000"))(
      "cache-mb", "--shards from S3: data.stream_cache_mb", cxxopts::value<int>()->default_value("4096"))(
      "workdir", "--shards: where the shard cache goes", cxxopts::value<std::string>()->default_value("/tmp/tp-bench-data-work"));
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
    const int world_size = args["world-size"].as<int>();
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

    // Timed from before the data is opened: listing S3 and fetching the index count towards the first batch.
    const double cpu_start = tp::bench::process_cpu_seconds();
    const auto start = std::chrono::steady_clock::now();
    tp::storage::Placement placement;
    placement.workdir = args["workdir"].as<std::string>();
    placement.topology.nnodes = world_size;
    placement.topology.node_rank = rank;
    placement.topology.rank = rank;
    placement.topology.local_rank = 0;
    placement.rank = rank;
    const tp::data::Datasets data = tp::storage::open_data(spec, std::filesystem::current_path(), placement, 1);
    const tp::data::DistributedSampler sampler(
        {data.train->size(), rank, world_size, true, false, 1, data.train_shard_sizes,
         static_cast<std::size_t>(spec.shuffle_buffer)});
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
        "{{\"loader\": \"trainpoint\", \"workers\": {}, \"rank\": {}, \"world_size\": {}, \"images\": {}, "
        "\"seconds\": {:.3f}, \"first_batch_s\": {:.3f}, \"cpu_seconds\": {:.3f}, \"peak_rss_mb\": {:.1f}, "
        "\"disk_mb\": {:.1f}, \"checksum\": {:.3f}}}\n",
        args["workers"].as<int>(), rank, world_size, images, seconds, first_batch,
        tp::bench::process_cpu_seconds() - cpu_start, static_cast<double>(usage.ru_maxrss) / 1024,
        static_cast<double>(cache_bytes) / (1 << 20), checksum);
  } catch (const tp::Error& error) {
    std::cerr << "tp-bench-data: " << error.what() << "\n";
    return static_cast<int>(error.code());
  }
  return 0;
}
