#include "commands.h"

#include <curl/curl.h>
#include <torch/torch.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>

#include "common/cpu.h"
#include "common/error.h"
#include "data/dataset.h"
#include "dist/communicator.h"
#include "dist/launcher.h"
#include "dist/topology.h"
#include "common/log.h"
#include "git/checkout.h"
#include "git/remote_url.h"
#include "k8s/manifest.h"
#include "model/model.h"
#include "preflight/preflight.h"
#include "s3/command.h"
#include "spec/spec.h"
#include "storage/data_source.h"
#include "storage/model_weights.h"
#include "storage/output.h"
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
  spdlog::info("fetching {} at {}", git::redacted_url(options.repo), options.ref.empty() ? "HEAD" : options.ref);
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

int visible_gpus() { return torch::cuda::is_available() ? static_cast<int>(torch::cuda::device_count()) : 0; }

// The preflight checks (docs/reliability.md), with the checkout and spec loading as their "spec" check.
preflight::Report run_preflight(const cli::Options& options, std::optional<SpecSource>& source,
                                std::optional<spec::LoadedSpec>& loaded) {
  preflight::Request request;
  request.git = options.git;
  request.git.url = options.repo;
  request.git.ref = options.ref;
  request.workdir = fs::absolute(options.workdir);
  request.git.workdir = request.workdir;
  request.visible_gpus = visible_gpus();
  request.load_spec = [&] {
    source = locate_spec(options);
    loaded = load_spec(options, *source);
    return preflight::SpecInRepo{loaded->spec, source->root};
  };
  return preflight::run(request);
}

int preflight_command(const cli::Options& options) {
  std::optional<SpecSource> source;
  std::optional<spec::LoadedSpec> loaded;
  const preflight::Report report = run_preflight(options, source, loaded);
  std::cout << preflight::format_table(report) << std::flush;
  preflight::throw_first_failure(report);
  return 0;
}

std::string choose_backend(const spec::DistSpec& spec) {
  if (spec.backend != "auto") return spec.backend;
  return torch::cuda::is_available() ? "nccl" : "gloo";
}

// Command mode: the user's own program, once per local rank, started from the checkout with
// torchrun's variables, so existing PyTorch code runs from git without a custom image.
int run_user_command(const cli::Options& options, const SpecSource& source, const spec::Spec& spec,
                     const dist::Topology& topology) {
  dist::WorkerLaunch launch;
  launch.program = spec.job.command.front();
  launch.arguments.assign(spec.job.command.begin() + 1, spec.job.command.end());
  launch.working_directory = source.root.string();
  launch.topology = topology;
  if (topology.rank) {
    // A launcher already made this process one rank: the program runs once, as that rank.
    launch.topology.nproc_per_node = 1;
    launch.environment = {{"RANK", std::to_string(*topology.rank)},
                          {"LOCAL_RANK", std::to_string(topology.local_rank.value_or(0))},
                          {"WORLD_SIZE", std::to_string(topology.world_size())},
                          {"LOCAL_WORLD_SIZE", std::to_string(topology.nproc_per_node)}};
  }
  const fs::path workdir = fs::absolute(options.workdir);
  const storage::OutputLocation output(spec, workdir);
  std::error_code error;
  fs::create_directories(output.local_dir(), error);
  if (error) fail(ExitCode::output, "job.output: cannot create {}: {}", output.local_dir().string(), error.message());
  launch.environment["TRAINPOINT_OUTPUT_DIR"] = output.local_dir().string();
  if (!spec.data.source.empty()) {
    const storage::Placement placement{workdir, topology, topology.rank.value_or(topology.node_rank)};
    launch.environment["TRAINPOINT_DATA_DIR"] = storage::local_data_for_command(spec.data, source.root, placement);
  }
  spdlog::info("command mode: running '{}' from {} as {} worker(s) ({} convention, node {} of {})",
               fmt::join(spec.job.command, " "), source.root.string(), launch.topology.nproc_per_node,
               topology.convention, topology.node_rank, topology.nnodes);
  const int status = dist::run_workers(launch);
  // What the program wrote goes to an s3:// output even when it failed: partial results help.
  if (output.remote()) output.publish(output.local_dir());
  return status;
}

int run(const cli::Options& options) {
  std::optional<SpecSource> located;
  std::optional<spec::LoadedSpec> loaded_spec;
  // Once per pod: workers that the node launched find its checks done.
  if (options.preflight && std::getenv(kPreparedCheckout) == nullptr) {
    preflight::throw_first_failure(run_preflight(options, located, loaded_spec));
  } else {
    located = locate_spec(options);
    loaded_spec = load_spec(options, *located);
  }
  const SpecSource& source = *located;
  const spec::LoadedSpec& loaded = *loaded_spec;
  const spec::Spec& spec = loaded.spec;
  const int devices = visible_gpus();
  const dist::Topology topology =
      dist::read_topology(dist::process_environment, static_cast<int>(spec.dist.nproc_per_node), devices);
  if (!spec.job.command.empty()) return run_user_command(options, source, spec, topology);

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

  const fs::path workdir = fs::absolute(options.workdir);
  const storage::OutputLocation output(spec, workdir);
  if (spec.checkpoint.resume == "auto") output.fetch_for_resume(spec.checkpoint.keep);
  const auto seed = static_cast<std::uint64_t>(spec.job.seed);
  const data::Datasets data = storage::open_data(spec.data, source.root, {workdir, topology, rank}, seed);
  torch::jit::Module model =
      model::create(storage::with_local_weights(spec, workdir), data.schema, source.root, seed);

  // Workers of one node share the cores the pod may use.
  model::set_compute_threads(std::max(1, usable_cores() / topology.nproc_per_node));
  std::unique_ptr<dist::Communicator> communicator;
  if (world_size == 1) {
    communicator = dist::single_process();
  } else {
    dist::ProcessGroupOptions group{choose_backend(spec.dist), rank, world_size, topology.master_addr,
                                    topology.master_port, std::chrono::seconds(spec.dist.timeout_s), local_rank};
    group.heartbeat = std::chrono::seconds(spec.dist.heartbeat_s);
    group.stall = std::chrono::seconds(spec.dist.stall_s);
    spdlog::info("joining {} ranks through {}:{} ({})", world_size, group.master_addr, group.master_port,
                 group.backend);
    communicator = dist::connect(group);
  }

  train::FitEnvironment environment;
  // A GPU per local rank (nproc_per_node "auto" is the number of GPUs).
  if (devices > 0) environment.device = torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(local_rank % devices));
  environment.publish = [&](const fs::path& file) { output.publish(file); };
  environment.withdraw = [&](const fs::path& file) { output.withdraw(file); };
  if (spec.train.lr_find) {
    train::find_learning_rate(model, data, spec, *communicator, output.local_dir(), environment);
    if (rank == 0) {
      for (const char* file : {"lr_find.jsonl", "lr_find.html"}) output.publish(output.local_dir() / file);
    }
    return 0;
  }
  const train::RunOrigin origin{git::redacted_url(options.repo), options.ref, source.commit, options.spec,
                                spec::describe(loaded)};
  const train::FitResult result = train::fit(model, data, spec, *communicator, output.local_dir(), origin, environment);
  if (rank == 0) {
    // The task's own validation metrics (a regression has no accuracy), if there was a validation set.
    const std::string validation = train::describe_validation(result.last, spec.train.top_k);
    spdlog::info("done: train_loss {:.4f}{}{}; outputs in {}", result.last.train_loss,
                 validation.empty() ? "" : " ", validation, output.name());
  }
  return 0;
}

// The spec is read from the local working tree (--checkout) and validated, so a broken spec is
// found before the job is submitted; --set values other than k8s.* travel to the job.
int render_job(const cli::Options& options) {
  std::vector<std::string> overrides = options.overrides;
  overrides.insert(overrides.end(), options.k8s_overrides.begin(), options.k8s_overrides.end());
  const spec::LoadedSpec loaded = spec::load_file(fs::path(options.checkout) / options.spec, overrides, options.spec);
  const spec::Spec& spec = loaded.spec;
  const spec::K8sSpec& k8s = spec.k8s;

  k8s::JobRequest request;
  request.kind = k8s.kind == "trainjob" ? k8s::Kind::trainjob : k8s::Kind::pytorchjob;
  request.name = k8s.name.empty() ? spec.job.name : k8s.name;
  request.name_space = k8s.name_space;
  request.image = k8s.image;
  request.workers = static_cast<int>(k8s.workers);
  request.gpus_per_worker = static_cast<int>(k8s.gpus_per_worker);
  request.nproc_per_node = request.gpus_per_worker > 0 ? request.gpus_per_worker
                                                       : std::max(1, static_cast<int>(spec.dist.nproc_per_node));
  request.cpu = k8s.cpu;
  request.memory = k8s.memory;
  request.shm_size = k8s.shm_size;
  request.scratch = k8s.scratch;
  request.backoff_limit = static_cast<int>(k8s.backoff_limit);
  request.repo = git::redacted_url(options.repo);
  request.ref = options.ref;
  request.spec = options.spec;
  for (const auto& item : options.overrides) {
    if (item.rfind("k8s.", 0) != 0) request.overrides.push_back(item);
  }
  request.secret = k8s.secret;
  request.vault_role = k8s.vault_role;
  request.vault_tenant = k8s.vault_tenant;
  request.vault_path = k8s.vault_path;
  const std::string manifest = k8s::render(request);

  if (options.manifest_file.empty()) {
    std::cout << manifest;
    return 0;
  }
  std::ofstream out(options.manifest_file);
  out << manifest;
  if (!out.flush()) fail(ExitCode::output, "cannot write the manifest to {}", options.manifest_file);
  spdlog::info("wrote {} ({} pod(s), {} process(es) each)", options.manifest_file, request.workers,
               request.nproc_per_node);
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
    case cli::Command::s3: return s3::run_s3_command(options.s3_arguments);
    case cli::Command::run: return run(options);
    case cli::Command::preflight: return preflight_command(options);
    case cli::Command::render_job: return render_job(options);
    case cli::Command::help: std::cout << options.help_text; return 0;
  }
  return 0;
}

}  // namespace tp::commands
