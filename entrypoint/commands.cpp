#include "commands.h"

#include <curl/curl.h>
#include <torch/torch.h>

#include <cstdio>
#include <cstdlib>
#include <thread>
#include <iostream>

#include "common/error.h"
#include "data/dataset.h"
#include "dist/communicator.h"
#include "dist/launcher.h"
#include "dist/topology.h"
#include "common/log.h"
#include "git/checkout.h"
#include "model/model.h"
#include "spec/spec.h"
#include "train/trainer.h"

namespace tp::commands {
namespace {

namespace fs = std::filesystem;

// Where the spec and the files it names come from: a checkout of --repo, or the local disk.
struct SpecSource {
  fs::path spec_file;
  fs::path root;        // relative paths in the spec are resolved from here
  std::string commit;   // empty for a local spec
};

// Set by the node for the workers it launches, so that they use its checkout instead of cloning.
constexpr const char* kPreparedCheckout = "TRAINPOINT_PREPARED_CHECKOUT";
constexpr const char* kPreparedCommit = "TRAINPOINT_PREPARED_COMMIT";

SpecSource locate_spec(const cli::Options& options) {
  if (const char* prepared = std::getenv(kPreparedCheckout)) {
    const char* commit = std::getenv(kPreparedCommit);
    return {fs::path(prepared) / options.spec, prepared, commit == nullptr ? "" : commit};
  }
  if (options.repo.empty()) {
    const fs::path file = fs::absolute(options.spec);
    return {file, file.parent_path(), ""};
  }
  spdlog::info("fetching {} at {}", options.repo, options.ref.empty() ? "HEAD" : options.ref);
  git::CheckoutRequest request = options.git;
  request.url = options.repo;
  request.ref = options.ref;
  request.workdir = fs::absolute(options.workdir);
  const git::Checkout checkout = git::checkout(request);
  return {checkout.path / options.spec, checkout.path, checkout.commit};
}

spec::LoadedSpec load_spec(const cli::Options& options, const SpecSource& source) {
  return spec::load_file(source.spec_file, options.overrides, options.spec);
}

int check(const cli::Options& options) {
  const SpecSource source = locate_spec(options);
  const spec::LoadedSpec loaded = load_spec(options, source);
  std::cout << "# " << options.spec << (source.commit.empty() ? "" : " at " + source.commit) << ": valid\n"
            << spec::describe(loaded);
  return 0;
}

std::string choose_backend(const spec::DistSpec& spec) {
  if (spec.backend != "auto") return spec.backend;
  return torch::cuda::is_available() ? "nccl" : "gloo";
}

int run(const cli::Options& options) {
  const SpecSource source = locate_spec(options);
  const spec::LoadedSpec loaded = load_spec(options, source);
  const spec::Spec& spec = loaded.spec;
  const int devices = torch::cuda::is_available() ? static_cast<int>(torch::cuda::device_count()) : 0;
  const dist::Topology topology =
      dist::read_topology(dist::process_environment, static_cast<int>(spec.dist.nproc_per_node), devices);

  if (!topology.rank && topology.nproc_per_node > 1) {
    // This process is the node: it has cloned once; the workers reuse its checkout.
    spdlog::info("spec {} is valid: job '{}'; {} convention, node {} of {}, {} workers per node", options.spec,
                 spec.job.name, topology.convention, topology.node_rank, topology.nnodes, topology.nproc_per_node);
    dist::WorkerLaunch launch;
    launch.arguments = options.arguments;
    launch.topology = topology;
    launch.environment = {{kPreparedCheckout, source.root.string()}, {kPreparedCommit, source.commit}};
    return dist::run_workers(launch);
  }

  const int rank = topology.rank.value_or(topology.node_rank);
  const int local_rank = topology.local_rank.value_or(0);
  const int world_size = topology.world_size();
  if (world_size > 1) log::set_rank(rank);
  spdlog::info("spec {} is valid: job '{}'", options.spec, spec.job.name);

  const fs::path output_dir = fs::absolute(fs::path(options.workdir) / spec.job.output);
  const auto seed = static_cast<std::uint64_t>(spec.job.seed);
  const data::Datasets data = data::open(spec.data, source.root, seed);
  torch::jit::Module model = model::create(spec.model, data.schema, source.root, seed);

  std::unique_ptr<dist::Communicator> communicator;
  if (world_size == 1) {
    communicator = dist::single_process();
  } else {
    // Workers of one node share its cores.
    if (devices == 0) torch::set_num_threads(std::max(1, static_cast<int>(std::thread::hardware_concurrency()) /
                                                              topology.nproc_per_node));
    dist::ProcessGroupOptions group{choose_backend(spec.dist), rank, world_size, topology.master_addr,
                                    topology.master_port, std::chrono::seconds(spec.dist.timeout_s), local_rank};
    spdlog::info("joining {} ranks through {}:{} ({})", world_size, group.master_addr, group.master_port,
                 group.backend);
    communicator = dist::connect(group);
  }

  const train::RunOrigin origin{options.repo, options.ref, source.commit, options.spec, spec::describe(loaded)};
  const train::FitResult result = train::fit(model, data, spec, *communicator, output_dir, origin);
  if (rank == 0) spdlog::info("done: train_loss {:.4f}, valid_loss {:.4f}, accuracy {:.4f}; outputs in {}", result.last.train_loss,
               result.last.valid_loss, result.last.valid_accuracy, output_dir.string());
  return 0;
}

int version() {
  std::cout << "trainpoint " << TRAINPOINT_VERSION << "\n"
            << "libtorch " << TORCH_VERSION << "\n"
            << "cuda " << (torch::cuda::is_available() ? "available" : "not available") << "\n"
            << "nccl " << (TRAINPOINT_HAS_NCCL ? "built in" : "not built") << "\n"
            << "libgit2 " << git::libgit2_version() << "\n"
            << "curl " << curl_version_info(CURLVERSION_NOW)->version << "\n";
  return 0;
}

}  // namespace

int execute(const cli::Options& options) {
  switch (options.command) {
    case cli::Command::check: return check(options);
    case cli::Command::version: return version();
    case cli::Command::spec_reference: std::cout << spec::markdown_reference(); return 0;
    case cli::Command::run: return run(options);
    case cli::Command::help: std::cout << options.help_text; return 0;
  }
  return 0;
}

}  // namespace tp::commands
