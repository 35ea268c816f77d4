// One rank of a distributed test scenario. Ranks come from torchrun's variables (none: world size 1).
//   tp-dist-worker equivalence --global-batch G --steps S --bucket-kb K --out FILE
//     trains a seeded MLP with SGD on a fixed synthetic dataset, each rank on its G/world share of every
//     step's batch, and writes the final parameters (one per line, %.9g) and the step timing.
//   tp-dist-worker hang --timeout SECONDS
//     all-reduces forever, printing "step N" lines, until a collective fails.
//   tp-dist-worker fail-before-rendezvous --failing-rank R --timeout SECONDS
//     rank R fails (a data error) in a step before the rendezvous; the others join and print "joined".
#include <torch/script.h>
#include <torch/torch.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "common/error.h"
#include "dist/communicator.h"
#include "dist/gradient_sync.h"
#include "dist/topology.h"
#include "model/model.h"

namespace {

using namespace tp;

std::string argument(int argc, char** argv, const std::string& name, const std::string& fallback) {
  for (int i = 2; i + 1 < argc; ++i) {
    if (argv[i] == name) return argv[i + 1];
  }
  return fallback;
}

dist::ProcessGroupOptions group_options(int timeout_seconds) {
  const auto topology = dist::read_topology(dist::process_environment, 1, 0);
  dist::ProcessGroupOptions options{dist::Backend::gloo, topology.rank.value_or(0), topology.world_size(),
                                    topology.master_addr, topology.master_port, std::chrono::seconds(timeout_seconds)};
  options.heartbeat = std::chrono::seconds(1);  // lost ranks are named within seconds
  return options;
}

std::unique_ptr<dist::Communicator> join(int timeout_seconds) {
  const dist::ProcessGroupOptions options = group_options(timeout_seconds);
  if (options.world_size == 1) return dist::single_process();
  return dist::connect(options);
}

int fail_before_rendezvous(int argc, char** argv) {
  const int failing_rank = std::stoi(argument(argc, argv, "--failing-rank", "0"));
  const dist::ProcessGroupOptions options = group_options(std::stoi(argument(argc, argv, "--timeout", "60")));
  dist::before_rendezvous(options, [&] {
    if (options.rank == failing_rank) fail(ExitCode::data, "data.source: table.csv has no rows");
  });
  auto communicator = dist::connect(options);
  std::printf("joined\n");
  return 0;
}

int equivalence(int argc, char** argv) {
  const int global_batch = std::stoi(argument(argc, argv, "--global-batch", "32"));
  const int steps = std::stoi(argument(argc, argv, "--steps", "5"));
  const std::size_t bucket_bytes = std::stoul(argument(argc, argv, "--bucket-kb", "4")) * 1024;
  const std::string out = argument(argc, argv, "--out", "params.txt");
  auto communicator = join(60);
  const int world = communicator->world_size();
  const int rank = communicator->rank();
  const int share = global_batch / world;

  spec::ModelSpec model_spec;
  model_spec.arch = "mlp";
  model_spec.hidden = {64, 64};
  data::Schema schema;
  schema.input_shape = {16};
  schema.num_outputs = 4;
  auto model = model::create(model_spec, schema, ".", 1);
  std::vector<torch::Tensor> parameters;
  std::vector<std::string> names;
  for (const auto& p : model.named_parameters()) {
    p.value.set_requires_grad(true);
    parameters.push_back(p.value);
    names.push_back(p.name);
  }
  torch::manual_seed(123);
  const auto inputs = torch::randn({steps * global_batch, 16});
  const auto labels = torch::randint(0, 4, {steps * global_batch}, torch::kLong);

  torch::optim::SGD optimizer(parameters, torch::optim::SGDOptions(0.1).momentum(0.9));
  std::optional<dist::GradientSynchronizer> synchronizer;
  if (world > 1) synchronizer.emplace(parameters, names, *communicator, dist::BucketOptions{bucket_bytes, bucket_bytes});
  for (int step = 0; step < steps; ++step) {
    const std::int64_t begin = step * global_batch + rank * share;
    optimizer.zero_grad();
    const auto output = model.forward({inputs.slice(0, begin, begin + share)}).toTensor();
    torch::nn::functional::cross_entropy(output, labels.slice(0, begin, begin + share)).backward();
    if (synchronizer) synchronizer->finish();
    optimizer.step();
  }

  std::ofstream file(out);
  for (const auto& parameter : parameters) {
    const auto flat = parameter.detach().reshape({-1});
    for (std::int64_t i = 0; i < flat.numel(); ++i) {
      char text[32];
      std::snprintf(text, sizeof text, "%.9g\n", flat[i].item<float>());
      file << text;
    }
  }
  if (synchronizer) {
    const auto& timing = synchronizer->last_timing();
    std::ofstream(out + ".timing") << "buckets " << synchronizer->bucket_count() << "\n"
                                   << "first_launch_us_before_backward_done "
                                   << std::chrono::duration_cast<std::chrono::microseconds>(timing.backward_done -
                                                                                           timing.first_launch)
                                          .count()
                                   << "\n";
  }
  communicator->barrier();
  return 0;
}

int hang(int argc, char** argv) {
  auto communicator = join(std::stoi(argument(argc, argv, "--timeout", "10")));
  auto tensor = torch::ones({1024});
  for (long step = 0;; ++step) {
    std::vector<torch::Tensor> tensors{tensor};
    communicator->all_reduce_sum(tensors);
    tensor.fill_(1);
    if (step % 100 == 0) {
      std::printf("step %ld\n", step);
      std::fflush(stdout);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::string mode = argc > 1 ? argv[1] : "";
    if (mode == "equivalence") return equivalence(argc, argv);
    if (mode == "hang") return hang(argc, argv);
    if (mode == "fail-before-rendezvous") return fail_before_rendezvous(argc, argv);
    std::fprintf(stderr, "usage: tp-dist-worker equivalence|hang|fail-before-rendezvous [options]\n");
    return 2;
  } catch (const tp::Error& error) {
    std::fprintf(stderr, "error: %s\n", error.what());
    return static_cast<int>(error.code());
  }
}
