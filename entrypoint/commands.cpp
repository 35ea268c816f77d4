#include "commands.h"

#include <curl/curl.h>
#include <unistd.h>
#include <torch/torch.h>
#if TRAINPOINT_WITH_CUDA
#include <cuda_runtime_api.h>
#include <fmt/ranges.h>
#endif

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>

#include "cluster_commands.h"
#include "notifications.h"
#include "command/onnx_export.h"
#include "command/prepare.h"
#include "command/program.h"
#include "common/cpu.h"
#include "common/error.h"
#include "common/files.h"
#include "common/url.h"
#include "data/dataset.h"
#include "data/make_dataset.h"
#include "dist/communicator.h"
#include "dist/device_plan.h"
#include "dist/launcher.h"
#include "dist/topology.h"
#include "common/log.h"
#include "git/checkout.h"
#include "git/remote_url.h"
#include "git/working_tree.h"
#include "k8s/manifest.h"
#include "model/model.h"
#include "preflight/preflight.h"
#include "s3/command.h"
#include "spec/spec.h"
#include "storage/data_source.h"
#include "storage/model_weights.h"
#include "storage/output.h"
#include "storage/pack.h"
#include "storage/predictions.h"
#include "storage/run_identity.h"
#include "train/lr_find.h"
#include "train/predict.h"
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
// The platform's [k8s] defaults in an image, when TRAINPOINT_PLATFORM_DEFAULTS names no other file.
constexpr const char* kPlatformDefaultsFile = "/etc/trainpoint/platform.toml";

// A run from a local repository trains the commit, not the working tree: edits not yet committed are
// named, so that nobody waits for a run of what they did not commit.
void compare_with_working_tree(const cli::Options& options, const git::Checkout& checkout) {
  const git::RemoteUrl remote = git::parse_remote_url(options.repo);
  if (remote.transport != git::Transport::local) return;
  const auto changes = git::working_tree_changes(remote.local_path, checkout.commit);
  if (!changes) return;
  const std::string commit = checkout.commit.substr(0, 12);
  const fs::path local = fs::absolute(remote.local_path).lexically_normal();
  if (!fs::exists(checkout.path / options.spec) && fs::exists(local / options.spec)) {
    fail(ExitCode::spec, "{}: spec file not found in commit {} of {}: the file is in the working tree but not "
         "committed (git add {} && git commit)", options.spec, commit, local.string(), options.spec);
  }
  if (changes->empty()) return;
  spdlog::warn("the working tree of {} differs from commit {}, which this run trains: {}. Edits that are not "
               "committed are not in the run: commit them (a spec value can also be changed with --set)",
               local.string(), commit, git::describe_changes(*changes));
}

SpecSource locate_spec(const cli::Options& options) {
  if (const char* prepared = std::getenv(kPreparedCheckout)) {
    const char* commit = std::getenv(kPreparedCommit);
    return {fs::path(prepared) / options.spec, prepared, commit == nullptr ? "" : commit};
  }
  if (options.repo.empty()) {
    const fs::path file = fs::absolute(options.spec);
    return {file, file.parent_path(), ""};
  }
  spdlog::info("fetching {} at {}", redacted_url(options.repo), options.ref.empty() ? "HEAD" : options.ref);
  git::CheckoutRequest request = options.git;
  request.url = options.repo;
  request.ref = options.ref;
  request.workdir = fs::absolute(options.workdir);
  const git::Checkout checkout = git::checkout(request);
  compare_with_working_tree(options, checkout);
  return {checkout.path / options.spec, checkout.path, checkout.commit};
}

spec::LoadedSpec load_spec(const cli::Options& options, const SpecSource& source) {
  return spec::load_file(source.spec_file, options.overrides, options.spec);
}

// `check` of a local file reads it as it is on disk, while `run --repo` reads it as committed: say so when the
// two differ.
void compare_with_commit(const fs::path& spec_file) {
  const auto root = git::enclosing_working_tree(spec_file.parent_path());
  if (!root) return;
  const std::string relative = spec_file.lexically_relative(*root).generic_string();
  const auto changes = git::working_tree_changes(*root, "HEAD");
  if (!changes) return;
  for (const auto& change : *changes) {
    const bool holds_spec = change.path == relative || (change.path.back() == '/' && relative.rfind(change.path, 0) == 0);
    if (!holds_spec) continue;
    spdlog::warn("{} is {} in the git working tree {}: this check reads the file on disk, but `trainpoint run --repo` "
                 "reads it as committed (HEAD has {}): commit it to run what is checked here",
                 spec_file.string(), change.what, root->string(),
                 change.what == "untracked" || change.what == "added" ? "no such file" : "another version");
  }
}

int check(const cli::Options& options) {
  const SpecSource source = locate_spec(options);
  const spec::LoadedSpec loaded = load_spec(options, source);
  if (options.repo.empty()) compare_with_commit(source.spec_file);
  std::cout << "# " << options.spec << (source.commit.empty() ? "" : " at " + source.commit) << ": valid\n"
            << spec::describe(loaded);
  return 0;
}

int visible_gpus() { return torch::cuda::is_available() ? static_cast<int>(torch::cuda::device_count()) : 0; }

// The preflight checks (docs/reliability.md), with the checkout and spec loading as their "spec" check.
preflight::Report run_preflight(const cli::Options& options, std::optional<SpecSource>& source,
                                std::optional<spec::LoadedSpec>& loaded, bool check_resume = true) {
  preflight::Request request;
  request.check_resume = check_resume;
  request.git = options.git;
  request.git.url = options.repo;
  request.git.ref = options.ref;
  request.workdir = fs::absolute(options.workdir);
  request.git.workdir = request.workdir;
  request.visible_gpus = visible_gpus();
  request.load_spec = [&] {
    source = locate_spec(options);
    loaded = load_spec(options, *source);
    return preflight::SpecInRepo{loaded->spec, source->root, source->commit};
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

// Command mode: the user's own program, once per local rank, started from the checkout with
// torchrun's variables, so existing PyTorch code runs from git without a custom image.
int run_user_command(const cli::Options& options, const SpecSource& source, const spec::Spec& spec,
                     const dist::Topology& topology) {
  const fs::path workdir = fs::absolute(options.workdir);
  // Before any rank starts: the requirements' environment (built once per node), the executable.
  const command::PreparedProgram program =
      command::prepare_program(spec.job, source.root, command::environment_cache(options.git.cache_dir, workdir));
  dist::WorkerLaunch launch;
  launch.program = program.executable.string();
  launch.arguments.assign(spec.job.command.begin() + 1, spec.job.command.end());
  launch.working_directory = source.root.string();
  launch.topology = topology;
  launch.environment = program.environment;
  launch.stop_grace_seconds = static_cast<int>(spec.k8s.grace_s);
  launch.run_id = spec.job.name;
  // As torchrun: a program that fails under torch's @record leaves its exception here, and the failure's
  // message quotes it (else the failed rank's last lines of stderr).
  launch.error_file_dir = (workdir / "command-errors").string();
  launch.keep_stderr_tail = true;
  const storage::OutputLocation output(spec, workdir);
  std::error_code error;
  fs::create_directories(output.local_dir(), error);
  if (error) fail(ExitCode::output, "job.output: cannot create {}: {}", output.local_dir().string(), error.message());
  launch.environment["TRAINPOINT_OUTPUT_DIR"] = output.local_dir().string();
  if (!spec.data.source.empty()) {
    const storage::Placement placement{workdir, topology, topology.rank.value_or(topology.node_rank)};
    launch.environment["TRAINPOINT_DATA_DIR"] = storage::local_data_for_command(spec.data, source.root, placement);
  }
  spdlog::info("command mode: running '{}' ({}) from {} as {} worker(s) ({} convention, node {} of {})",
               fmt::join(spec.job.command, " "), program.ran, source.root.string(), launch.topology.nproc_per_node,
               topology.convention, topology.node_rank, topology.nnodes);
  const dist::WorkersResult result = dist::run_workers(launch);
  // What the program wrote goes to an s3:// output even when it failed: partial results help.
  if (output.remote()) output.publish(output.local_dir());
  command::check_workers(result, spec.job.command, program.ran, command::failure_cause(result, source.root));
  return 0;
}

// One line for the checks that passed; `trainpoint preflight` prints each with what it found.
void log_preflight_summary(const preflight::Report& report) {
  std::vector<std::string> passed, skipped;
  double seconds = 0;
  for (const auto& check : report.checks) {
    (check.status == preflight::Status::passed ? passed : skipped).push_back(check.name);
    seconds += check.seconds;
  }
  spdlog::info("preflight: {} checks passed in {:.2f}s ({}){}", passed.size(), seconds, fmt::join(passed, ", "),
               skipped.empty() ? "" : fmt::format("; skipped: {}", fmt::join(skipped, ", ")));
}

// A pod whose preflight failed tells the other pods, which would otherwise wait for it until dist.timeout_s:
// they stop with its class and message, as for any failure before the rendezvous (dist/communicator.h). The
// pod speaks as its first rank. A spec that does not load fails every pod's own check alike, and without
// valid launcher variables there is nobody to tell (the master check said so).
void announce_preflight_failure(const std::optional<spec::LoadedSpec>& loaded, const Error& error) {
  if (!loaded) return;
  const spec::DistSpec& dist_spec = loaded->spec.dist;
  dist::Topology topology;
  try {
    topology = dist::read_topology(dist::process_environment, static_cast<int>(dist_spec.nproc_per_node),
                                   visible_gpus());
  } catch (const Error&) {
    return;
  }
  // The pod speaks for its launched ranks, which will not start; a worker process only for itself.
  const int silent_ranks = topology.rank ? 1 : topology.nproc_per_node;
  if (topology.world_size() == silent_ranks) return;  // the whole world is this pod: nobody to tell
  dist::ProcessGroupOptions group;
  group.rank = topology.rank.value_or(topology.node_rank * topology.nproc_per_node);
  group.world_size = topology.world_size();
  group.master_addr = topology.master_addr;
  group.master_port = topology.master_port;
  group.timeout = std::chrono::seconds(dist_spec.timeout_s);
  dist::announce_failure(group, error.code(), error.what(), silent_ranks);
}

// The spec located and loaded, after the pod's preflight when it runs one: once per pod, so workers that the
// node launched find its checks done.
std::pair<SpecSource, spec::LoadedSpec> checked_spec(const cli::Options& options,
                                                     notifications::RunDescription& described) {
  std::optional<SpecSource> located;
  std::optional<spec::LoadedSpec> loaded;
  if (options.preflight && std::getenv(kPreparedCheckout) == nullptr) {
    const preflight::Report report = run_preflight(options, located, loaded, /*check_resume=*/false);
    notifications::describe_run(options, located ? located->commit : "", loaded ? &*loaded : nullptr, described);
    try {
      preflight::throw_first_failure(report);
    } catch (const Error& error) {
      announce_preflight_failure(loaded, error);
      throw;
    }
    log_preflight_summary(report);
  } else {
    located = locate_spec(options);
    loaded = load_spec(options, *located);
    notifications::describe_run(options, located ? located->commit : "", loaded ? &*loaded : nullptr, described);
  }
  return {std::move(*located), std::move(*loaded)};
}

// This process is the node: it has cloned once, and its workers reuse its checkout.
int launch_node_workers(const cli::Options& options, const SpecSource& source, const spec::Spec& spec,
                        const dist::Topology& topology) {
  spdlog::info("spec {} is valid: job '{}'; {} convention, node {} of {}, {} workers per node", options.spec,
               spec.job.name, topology.convention, topology.node_rank, topology.nnodes, topology.nproc_per_node);
  dist::WorkerLaunch launch;
  launch.arguments = options.arguments;
  launch.topology = topology;
  launch.environment = {{kPreparedCheckout, source.root.string()}, {kPreparedCommit, source.commit}};
  launch.stop_grace_seconds = static_cast<int>(spec.k8s.grace_s);
  return dist::run_workers(launch).exit_code();
}

// Where a rank trains and what it knows of its output before training.
train::FitEnvironment fit_environment(const dist::DevicePlan& plan, storage::OutputLocation& output,
                                      const std::optional<storage::RunIdentity>& identity,
                                      const dist::Topology& topology, int rank) {
  train::FitEnvironment environment;
  if (plan.gpu) environment.device = torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(*plan.gpu));
  environment.checkpoints_root = output.checkpoints_root();
  environment.identity = identity;
  environment.node_copy = topology.local_rank.value_or(0) == 0 && rank != 0 && !output.remote();
  environment.final_outputs_present = rank == 0 && output.has_final_outputs();
  environment.local_rank = topology.local_rank.value_or(0);
  if (output.remote()) {
    // Only an s3:// output has anything to publish; a local one also spares the epoch's end the wait for the
    // sinks' files.
    environment.publish = [&output](const fs::path& file) { output.publish(file); };
    environment.withdraw = [&output](const fs::path& file) { output.withdraw(file); };
  }
  return environment;
}

// The ranks' group, as the launcher's variables and the spec set it up.
dist::ProcessGroupOptions process_group(const dist::DevicePlan& plan, const dist::Topology& topology,
                                        const spec::DistSpec& dist_spec) {
  dist::ProcessGroupOptions group{plan.backend,
                                  topology.rank.value_or(topology.node_rank),
                                  topology.world_size(),
                                  topology.master_addr,
                                  topology.master_port,
                                  std::chrono::seconds(dist_spec.timeout_s),
                                  plan.gpu};
  group.heartbeat = std::chrono::seconds(dist_spec.heartbeat_s);
  group.stall = std::chrono::seconds(dist_spec.stall_s);
  return group;
}

std::unique_ptr<dist::Communicator> join_ranks(const dist::ProcessGroupOptions& group) {
  if (group.world_size == 1) return dist::single_process();
  spdlog::info("joining {} ranks through {}:{} ({})", group.world_size, group.master_addr, group.master_port,
               dist::name(group.backend));
  return dist::connect(group);
}

// One rank of the built-in engine: its output, data and model, the rendezvous, then lr_find or training.
int train_rank(const cli::Options& options, const SpecSource& source, const spec::LoadedSpec& loaded,
               const dist::Topology& topology, const dist::DevicePlan& plan) {
  const spec::Spec& spec = loaded.spec;
  const dist::ProcessGroupOptions group = process_group(plan, topology, spec.dist);
  const int rank = group.rank;
  if (group.world_size > 1) log::set_rank(rank);
  // The node that launched this worker has said so.
  if (std::getenv(kPreparedCheckout) == nullptr) spdlog::info("spec {} is valid: job '{}'", options.spec, spec.job.name);

  const fs::path workdir = fs::absolute(options.workdir);
  storage::OutputLocation output(spec, workdir);
  // Rank 0 writes the outputs: it holds the output's lock, and decides which run this is before any
  // rendezvous, so that a changed setting fails in seconds and names what changed. A rank that fails before
  // the rendezvous tells the others, which then stop with its message instead of waiting for it.
  std::optional<storage::OutputLock> lock;
  std::optional<storage::RunIdentity> identity;
  if (rank == 0) {
    dist::before_rendezvous(group, [&] {
      lock.emplace(output.local_dir());
      identity = storage::run_identity(spec, source.root, source.commit);
      output.fetch_for_resume(identity->key(), spec.checkpoint.keep);
      if (spec.checkpoint.resume == spec::Resume::automatic) {
        storage::require_same_run(*identity, output.checkpoints_root(), output.name());
      }
    });
  }
  const auto seed = static_cast<std::uint64_t>(spec.job.seed);
  const data::Datasets data = dist::before_rendezvous(
      group, [&] { return storage::open_data(spec.data, source.root, {workdir, topology, rank}, seed); });
  torch::jit::Module model = dist::before_rendezvous(
      group, [&] { return model::create(storage::with_local_weights(spec, workdir), data.schema, source.root, seed); });

  // Workers of one node share the cores the pod may use.
  model::set_compute_threads(std::max(1, usable_cores() / topology.nproc_per_node));
  const std::unique_ptr<dist::Communicator> communicator = join_ranks(group);
  const std::unique_ptr<telemetry::StallNotifier> stall_watch =
      rank == 0 && group.world_size > 1
          ? notifications::watch_stalls(options, source.commit, spec, [&] { return communicator->stalled_ranks(); })
          : nullptr;
  const train::FitEnvironment environment = fit_environment(plan, output, identity, topology, rank);
  if (spec.train.lr_find) {
    train::find_learning_rate(model, data, spec, *communicator, output.local_dir(), environment);
    if (rank == 0) {
      for (const char* file : {"lr_find.jsonl", "lr_find.html"}) output.publish(output.local_dir() / file);
    }
    return 0;
  }
  const train::RunOrigin origin{redacted_url(options.repo), options.ref, source.commit, options.spec,
                                spec::describe(loaded)};
  const train::FitResult result = train::fit(model, data, spec, *communicator, output.local_dir(), origin, environment);
  if (rank == 0) {
    // The task's own validation metrics (a regression has no accuracy), if there was a validation set.
    const std::string validation = train::describe_validation(result.last, spec.train.top_k);
    spdlog::info("done{}: train_loss {:.4f}{}{}; outputs in {}", result.already_complete ? " (already)" : "",
                 result.last.train_loss, validation.empty() ? "" : " ", validation,
                 output.remote() ? output.name() : output.local_dir().lexically_normal().string());
  }
  return 0;
}

int run(const cli::Options& options, notifications::RunDescription& described) {
  notifications::describe_run(options, "", nullptr, described);
  const auto [source, loaded] = checked_spec(options, described);
  const spec::Spec& spec = loaded.spec;
  // A malformed webhook is a usage error now, not at the end.
  telemetry::resolve_webhooks(spec.notify.webhooks, spec.notify.format, dist::process_environment);
  const int devices = visible_gpus();
  const dist::Topology topology =
      dist::read_topology(dist::process_environment, static_cast<int>(spec.dist.nproc_per_node), devices);
  // Checked here too: a run without preflight, and each worker with its own local rank.
  const dist::DevicePlan plan = dist::plan_devices(spec, topology, devices);
  if (!spec.job.command.empty()) return run_user_command(options, source, spec, topology);
  if (!topology.rank && topology.nproc_per_node > 1) return launch_node_workers(options, source, spec, topology);
  return train_rank(options, source, loaded, topology, plan);
}

// A job.output in the pod's own filesystem is lost with the pod: the model of a finished job with it.
void warn_if_output_is_lost(const spec::Spec& spec, const std::string& origin) {
  const std::string& output = spec.job.output;
  const std::string scratch = std::string(k8s::kScratchMount) + "/";
  const bool on_node = !spec.k8s.scratch.empty() && (fs::path(output).is_relative() || output.rfind(scratch, 0) == 0);
  if (output.rfind("s3://", 0) == 0 || on_node) return;
  const std::string where = fs::path(output).is_relative()
                                ? fmt::format("{}work/$(POD_NAME)/{}, an emptyDir", scratch, output)
                                : "the container's filesystem";
  spdlog::warn("job.output = \"{}\" ({}) is written inside each pod ({}), which is deleted when the pod ends: the "
               "model would be lost with it. Keep it with job.output = \"s3://bucket/prefix\" (uploaded as each file "
               "is written), or --scratch NODE_DIR (k8s.scratch, a directory on the node kept after the pod)",
               output, origin, where);
}

// render-job --predict: the pods run `trainpoint predict` (each its share of the parts, by RANK and
// WORLD_SIZE), with the data's S3 endpoint unless the words name one; the job is <name>-predict unless k8s.name
// names it, and serves no metrics.
void predict_job(const std::vector<std::string>& words, const spec::Spec& spec, k8s::JobRequest& request) {
  request.arguments = {"predict"};
  request.arguments.insert(request.arguments.end(), words.begin(), words.end());
  if (!spec.data.endpoint.empty() && std::find(words.begin(), words.end(), "--endpoint") == words.end()) {
    request.arguments.insert(request.arguments.end(), {"--endpoint", spec.data.endpoint});
  }
  if (spec.k8s.name.empty()) request.name = spec.job.name + "-predict";
  request.metrics_port = 0;
}

// The platform team's [k8s] defaults: the file TRAINPOINT_PLATFORM_DEFAULTS names (which must exist), else
// /etc/trainpoint/platform.toml when the image has one. The spec's own [k8s] and --set override them.
std::optional<spec::PlatformDefaults> platform_defaults() {
  const char* named = std::getenv("TRAINPOINT_PLATFORM_DEFAULTS");
  const fs::path file = named != nullptr && *named != '\0' ? fs::path(named) : fs::path(kPlatformDefaultsFile);
  if (named == nullptr && !fs::exists(file)) return std::nullopt;
  if (!fs::is_regular_file(file)) {
    fail(ExitCode::usage, "TRAINPOINT_PLATFORM_DEFAULTS={}: no such file (the platform's [k8s] defaults)",
         file.string());
  }
  spdlog::info("platform defaults: {}", file.string());
  return spec::PlatformDefaults{read_file(file, ExitCode::spec), file.string()};
}

struct RenderedJob {
  k8s::JobRequest request;
  std::string manifest;
};

// The job of render-job and submit. The spec is read from the local working tree (--checkout) and validated, so
// a broken spec is found before the job is submitted; --set values other than k8s.* (but k8s.grace_s) travel to
// the job.
RenderedJob rendered_job(const cli::Options& options) {
  std::vector<std::string> overrides = options.overrides;
  overrides.insert(overrides.end(), options.k8s_overrides.begin(), options.k8s_overrides.end());
  const spec::LoadedSpec loaded =
      spec::load_file(fs::path(options.checkout) / options.spec, overrides, options.spec, platform_defaults());
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
  request.grace_s = static_cast<int>(k8s.grace_s);
  // Command mode runs the user's program, which serves no trainpoint metrics.
  request.metrics_port = spec.job.command.empty() ? static_cast<int>(k8s.metrics_port) : 0;
  request.repo = redacted_url(options.repo);
  request.ref = options.ref;
  request.spec = options.spec;
  // Of the k8s settings the pods read only k8s.grace_s: their launcher's time from SIGTERM to SIGKILL, which
  // must stay the manifest's terminationGracePeriodSeconds. The others shape the manifest alone.
  for (const auto& item : options.overrides) {
    const std::string key = item.substr(0, item.find('='));
    if (key.rfind("k8s.", 0) != 0 || key == "k8s.grace_s") request.overrides.push_back(item);
  }
  if (!options.predict_words.empty()) predict_job(options.predict_words, spec, request);
  request.secret = k8s.secret;
  request.vault_role = k8s.vault_role;
  request.vault_tenant = k8s.vault_tenant;
  request.vault_path = k8s.vault_path;
  request.node_selector = k8s.node_selector;
  request.tolerations = k8s.tolerations;
  request.queue = k8s.queue;
  request.priority_class = k8s.priority_class;
  request.active_deadline_s = static_cast<int>(k8s.active_deadline_s);
  request.ttl_s = static_cast<int>(k8s.ttl_s);
  request.service_account = k8s.service_account;
  request.image_pull_secret = k8s.image_pull_secret;
  request.volumes = k8s.volumes;
  request.output = spec.job.output;
  std::string manifest = k8s::render(request);
  warn_if_output_is_lost(spec, loaded.origins.at("job.output"));
  return {std::move(request), std::move(manifest)};
}

int render_job(const cli::Options& options) {
  const RenderedJob job = rendered_job(options);
  if (options.manifest_file.empty()) {
    std::cout << job.manifest;
    return 0;
  }
  std::ofstream out(options.manifest_file);
  out << job.manifest;
  if (!out.flush()) fail(ExitCode::output, "cannot write the manifest to {}", options.manifest_file);
  spdlog::info("wrote {} ({} pod(s), {} process(es) each)", options.manifest_file, job.request.workers,
               job.request.nproc_per_node);
  return 0;
}

int submit(const cli::Options& options) {
  const RenderedJob job = rendered_job(options);
  return cluster::submit(options.cluster, job.request, job.manifest);
}

// A CUDA build names the CUDA runtime it loaded and the GPUs it sees, by name (a CUDA LibTorch runs on a
// machine without one, on the CPU); a CPU build says it has no CUDA.
std::string cuda_description() {
#if TRAINPOINT_WITH_CUDA
  int runtime = 0;
  if (cudaRuntimeGetVersion(&runtime) != cudaSuccess) {
    return "runtime version unknown (cudaRuntimeGetVersion failed)";
  }
  if (!torch::cuda::is_available()) return fmt::format("{}.{}, no GPU visible", runtime / 1000, runtime % 1000 / 10);
  std::vector<std::string> names;
  for (int device = 0; device < static_cast<int>(torch::cuda::device_count()); ++device) {
    cudaDeviceProp properties{};
    names.push_back(cudaGetDeviceProperties(&properties, device) == cudaSuccess ? properties.name : "unnamed");
  }
  return fmt::format("{}.{}, {} GPU(s) visible: {}", runtime / 1000, runtime % 1000 / 10, names.size(),
                     fmt::join(names, ", "));
#else
  return "not built (CPU-only LibTorch)";
#endif
}

// `trainpoint pack`: without --workdir, its temporary files go to a folder of its own, removed when it ends.
int pack_command(storage::PackRequest request) {
  const bool own_workdir = request.workdir.empty();
  if (own_workdir) {
    request.workdir = fs::temp_directory_path() / fmt::format("trainpoint-pack-{}", ::getpid());
  }
  try {
    storage::pack(request);
  } catch (...) {
    if (own_workdir) fs::remove_all(request.workdir);
    throw;
  }
  if (own_workdir) fs::remove_all(request.workdir);
  return 0;
}

// `trainpoint predict`: one process per pod; where the pod stands in the job (RANK and WORLD_SIZE, or a
// PyTorchJob's or TrainJob's variables) says which parts are its own.
int predict_command(const storage::PredictRequest& request) {
  // The ranks never meet (parts are their only exchange), so no master address is needed.
  const auto environment = [](const std::string& name) -> std::optional<std::string> {
    const auto value = dist::process_environment(name);
    if (!value && name == "MASTER_ADDR") return "unused";
    return value;
  };
  const dist::Topology topology = dist::read_topology(environment, 1, 0);
  const int rank = topology.rank.value_or(topology.node_rank);
  const int world_size = topology.rank ? topology.world_size() : topology.nnodes;
  if (world_size > 1) spdlog::info("predicting as rank {} of {} ({})", rank, world_size, topology.convention);
  model::set_compute_threads(usable_cores());  // one process per pod: all of its cores
  return train::predict(request, rank, world_size);
}

// `trainpoint export --onnx`: an s3:// model is downloaded first.
int export_command(const cli::ExportOptions& options) {
  const fs::path model = storage::local_copy(options.model, options.connection,
                                             fs::path(options.workdir) / "export-inputs", ExitCode::model);
  command::export_onnx({model, options.onnx, options.python, options.opset});
  return 0;
}

int version() {
  const std::string nccl = dist::nccl_version();
  std::cout << "trainpoint " << TRAINPOINT_VERSION << "\n"
            << "libtorch " << TORCH_VERSION << "\n"
            << "cuda " << cuda_description() << "\n"
            << "nccl " << (nccl.empty() ? "not built" : nccl) << "\n"
            << "libgit2 " << git::libgit2_version() << "\n"
            << "curl " << curl_version_info(CURLVERSION_NOW)->version << "\n";
  return 0;
}

// Whether this process speaks for the job in notifications: the pod of node rank 0 (its launcher, or its only
// process), not the workers a node launched, nor the other pods.
bool speaks_for_job() {
  if (std::getenv(kPreparedCheckout) != nullptr) return false;
  try {
    const dist::Topology topology = dist::read_topology(dist::process_environment, 0, 0);
    return topology.rank ? *topology.rank == 0 : topology.node_rank == 0;
  } catch (const Error&) {
    return false;  // the run says what is wrong with the launcher's variables
  }
}

}  // namespace

int execute(const cli::Options& options) {
  switch (options.command) {
    case cli::Command::check: return check(options);
    case cli::Command::version: return version();
    case cli::Command::spec_reference: std::cout << spec::markdown_reference(); return 0;
    case cli::Command::s3: return s3::run_s3_command(options.s3_command);
    case cli::Command::make_dataset: return data::make_dataset(options.make_dataset);
    case cli::Command::pack: return pack_command(options.pack);
    case cli::Command::predict: return predict_command(options.predict);
    case cli::Command::export_model: return export_command(options.export_model);
    case cli::Command::run:
      return notifications::run_and_notify(speaks_for_job(),
                                           [&](notifications::RunDescription& described) { return run(options, described); });
    case cli::Command::preflight: return preflight_command(options);
    case cli::Command::render_job: return render_job(options);
    case cli::Command::submit: return submit(options);
    case cli::Command::list_jobs: return cluster::list(options.cluster);
    case cli::Command::status: return cluster::status(options.cluster);
    case cli::Command::logs: return cluster::logs(options.cluster);
    case cli::Command::cancel: return cluster::cancel(options.cluster);
    case cli::Command::help: return cli::print_help(options);
  }
  return 0;
}

}  // namespace tp::commands
