// One epoch of trainpoint's data loader over an image folder with ImageNet-style training transforms
// (random resized crop, flip, normalize), printing one JSON line: images, seconds, CPU seconds.
#include <torch/torch.h>

#include <chrono>
#include <cxxopts.hpp>
#include <iostream>
#include <numeric>

#include "common/error.h"
#include "common/memory.h"
#include "data/dataset.h"
#include "data/loader.h"
#include "data/sampler.h"
#include "measure/cpu_time.h"

int main(int argc, char** argv) {
  cxxopts::Options options("tp-bench-data", "trainpoint's loader: one epoch over an image folder");
  options.add_options()("dir", "image folder", cxxopts::value<std::string>())(
      "workers", "decoding threads", cxxopts::value<int>()->default_value("2"))(
      "batch", "batch size", cxxopts::value<int>()->default_value("64"))(
      "size", "output image size", cxxopts::value<int>()->default_value("224"));
  options.parse_positional({"dir"});
  try {
    const auto args = options.parse(argc, argv);
    if (!args.count("dir")) {
      std::cerr << options.help();
      return 2;
    }
    at::set_num_threads(1);  // the workers are the only parallelism, as in torchvision's DataLoader
    tp::keep_freed_memory();  // as the trainer's process does
    tp::spec::DataSpec spec{};
    spec.source = args["dir"].as<std::string>();
    spec.format = tp::spec::DataFormat::image_folder;
    spec.valid = 0;
    spec.image_size = args["size"].as<int>();
    spec.channels = 3;
    spec.task = tp::spec::Task::classification;
    spec.augment = {"random_resized_crop", "flip"};
    spec.resize = "crop";
    spec.normalize = "imagenet";
    spec.max_bad_files = 0;
    const tp::data::Datasets data = tp::data::open(spec, std::filesystem::current_path(), 1);
    const tp::data::DistributedSampler sampler({data.train->size(), 0, 1, true, false, 1});

    const double cpu_start = tp::bench::process_cpu_seconds();
    const auto start = std::chrono::steady_clock::now();
    tp::data::Loader loader(data.train, sampler.indices(0), 0, {args["batch"].as<int>(), args["workers"].as<int>()});
    std::int64_t images = 0;
    double checksum = 0;
    while (auto batch = loader.next()) {
      images += batch->inputs.size(0);
      checksum += batch->inputs[0][0][0][0].item<float>();
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::cout << fmt::format(
        "{{\"loader\": \"trainpoint\", \"workers\": {}, \"images\": {}, \"seconds\": {:.3f}, "
        "\"cpu_seconds\": {:.3f}, \"checksum\": {:.3f}}}\n",
        args["workers"].as<int>(), images, seconds, tp::bench::process_cpu_seconds() - cpu_start, checksum);
  } catch (const tp::Error& error) {
    std::cerr << "tp-bench-data: " << error.what() << "\n";
    return static_cast<int>(error.code());
  }
  return 0;
}
