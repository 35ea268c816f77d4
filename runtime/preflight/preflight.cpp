#include "preflight/preflight.h"

#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <thread>

#include "command/prepare.h"
#include "common/files.h"
#include "common/log.h"
#include "common/tcp.h"
#include "common/url.h"
#include "s3/client.h"
#include "s3/paths.h"
#include "s3/stage.h"
#include "storage/connection.h"
#include "storage/output.h"
#include "storage/run_identity.h"

namespace tp::preflight {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

std::string size_text(std::uint64_t bytes) {
  if (bytes >= (1ull << 30)) return fmt::format("{:.1f} GiB", static_cast<double>(bytes) / (1ull << 30));
  return fmt::format("{:.1f} MiB", static_cast<double>(bytes) / (1ull << 20));
}


// The directory itself if it exists, else its nearest existing ancestor (where it would be created).
fs::path existing_ancestor(fs::path path) {
  path = fs::absolute(path).lexically_normal();
  std::error_code error;
  while (!fs::exists(path, error) && path.has_relative_path()) path = path.parent_path();
  return path;
}

// Runs one check: `body` returns what it found; a tp::Error is the check's failure.
CheckResult timed(const std::string& name, const std::function<std::string()>& body) {
  CheckResult result;
  result.name = name;
  const auto started = Clock::now();
  try {
    result.detail = body();
    result.status = Status::passed;
  } catch (const Error& error) {
    result.status = Status::failed;
    result.detail = error.what();
    result.code = error.code();
  } catch (const std::exception& error) {
    result.status = Status::failed;
    result.detail = fmt::format("internal error: {}", error.what());
    result.code = ExitCode::internal;
  }
  result.seconds = std::chrono::duration<double>(Clock::now() - started).count();
  if (result.status == Status::passed) {
    spdlog::debug("preflight: {}: ok in {:.2f}s: {}", name, result.seconds, result.detail);
  } else {
    // A warning: the run's one error line is the first failure's, when it stops.
    spdlog::warn("preflight: {}: FAILED in {:.2f}s: {}", name, result.seconds, result.detail);
  }
  return result;
}

CheckResult skipped(const std::string& name, const std::string& why) {
  CheckResult result;
  result.name = name;
  result.detail = why;
  spdlog::debug("preflight: {}: skipped: {}", name, why);
  return result;
}

std::string check_ref(const git::CheckoutRequest& request) {
  const git::RemoteRef ref = git::resolve_remote_ref(request);
  const std::string url = redacted_url(request.url);
  if (ref.name.empty()) {
    return fmt::format("{} at {}: a commit SHA that no branch or tag points at; the checkout fetches it", url, ref.sha);
  }
  return fmt::format("{} at '{}': {} is commit {}", url, request.ref.empty() ? "HEAD" : request.ref, ref.name, ref.sha);
}

// Lists s3:// sources (adding their bytes to `s3_bytes`) and finds local ones.
std::string check_data(const SpecInRepo& loaded, std::uint64_t& s3_bytes) {
  const spec::DataSpec& data = loaded.spec.data;
  std::vector<std::string> found;
  for (const auto& [key, source] : {std::pair<const char*, std::string>{"data.source", data.source},
                                    std::pair<const char*, std::string>{"data.valid_source", data.valid_source}}) {
    if (source.empty()) continue;
    if (s3::is_s3_url(source)) {
      s3::Client client(s3::resolve_connection(storage::connection_options(data)));
      const s3::SourceListing listing = s3::list_source(client, source);
      s3_bytes += listing.bytes;
      found.push_back(fmt::format("{} {}: {} objects, {} at {} (credentials from {})", key, source,
                                  listing.objects.size(), size_text(listing.bytes), client.connection().endpoint,
                                  client.connection().credentials.source));
      continue;
    }
    const fs::path path = (loaded.root / source).lexically_normal();
    std::error_code error;
    if (!fs::exists(path, error)) {
      // A path typed relative to where the command runs, as a shell user would.
      const fs::path here = fs::absolute(source).lexically_normal();
      const std::string hint =
          fs::path(source).is_relative() && fs::exists(here, error)
              ? fmt::format("; {} is in the current directory: did you mean {}={}?", source, key, here.string())
              : "";
      fail(ExitCode::data, "{}: {} does not exist (relative paths are taken from the repository root){}", key,
           path.string(), hint);
    }
    found.push_back(fmt::format("{} {}: local", key, path.string()));
  }
  if (found.empty()) return "no data.source (command mode)";
  return fmt::format("{}", fmt::join(found, "; "));
}

// s3:// outputs: puts and deletes a probe object under the prefix, with the data's endpoint and credentials.
std::string check_s3_output(const spec::Spec& spec) {
  s3::Client client(s3::resolve_connection(storage::connection_options(spec.data)));
  const s3::S3Url url = s3::parse_s3_url(spec.job.output);
  const std::string prefix = s3::directory_prefix(url.key);
  const std::string key = prefix + fmt::format(".trainpoint-preflight-{}", ::getpid());
  const fs::path probe = fs::temp_directory_path() / fmt::format("trainpoint-preflight-{}", ::getpid());
  write_file_atomic(probe, "trainpoint preflight probe\n");
  try {
    client.upload(url.bucket, {{probe, key}});
    client.remove(url.bucket, key);
  } catch (const Error& error) {
    fs::remove(probe);
    // A missing bucket is the output's problem here, not the data's.
    if (error.code() == ExitCode::data) rethrow_as(ExitCode::output, "job.output {}", spec.job.output);
    throw;
  }
  fs::remove(probe);
  return fmt::format("job.output {}: wrote and deleted a probe object at {} (credentials from {})", spec.job.output,
                     client.connection().endpoint, client.connection().credentials.source);
}

// checkpoint.resume = "auto": the checkpoints in job.output are this run's, or there are none, as rank 0
// checks before its rendezvous (storage/run_identity.h). An s3:// output's run identities are fetched.
std::string check_resume(const SpecInRepo& loaded, const fs::path& workdir) {
  storage::OutputLocation output(loaded.spec, workdir);
  const storage::RunIdentity identity = storage::run_identity(loaded.spec, loaded.root, loaded.commit);
  output.fetch_for_resume(identity.key(), 0);
  if (const auto mine = storage::require_same_run(identity, output.checkpoints_root(), output.name())) {
    return fmt::format("run {}: resumes from its checkpoints in {}", identity.key(), mine->string());
  }
  return fmt::format("run {}: no checkpoints of it in {}; it starts afresh", identity.key(), output.name());
}

// Writes and deletes a probe file where the outputs go (or, before they exist, where they would be created).
std::string check_output(const fs::path& output) {
  const fs::path directory = existing_ancestor(output);
  std::error_code error;
  if (!fs::is_directory(directory, error)) {
    fail(ExitCode::output, "job.output: {} is not a directory: fix job.output", directory.string());
  }
  const fs::path probe = directory / fmt::format(".trainpoint-preflight-{}", ::getpid());
  {
    std::ofstream out(probe);
    if (out) out << "trainpoint preflight probe\n";
    if (!out || !out.flush()) {
      const int cause = errno;
      const bool full = cause == ENOSPC || cause == EDQUOT;
      fail(full ? ExitCode::storage : ExitCode::output,
           "job.output: cannot write in {}: {}: fix job.output or the directory's permissions", directory.string(),
           std::strerror(cause));
    }
  }
  if (!fs::remove(probe, error)) {
    fail(ExitCode::output, "job.output: cannot delete a file in {}: {}", directory.string(), error.message());
  }
  const fs::path absolute = fs::absolute(output).lexically_normal();
  return directory == absolute ? fmt::format("{} is writable", absolute.string())
                               : fmt::format("{} will be created in {}, which is writable", absolute.string(),
                                             directory.string());
}

// Waits (until `timeout`) for the master's address to resolve and its port to accept a connection.
std::string check_master(const dist::Topology& topology, std::chrono::seconds timeout) {
  const auto started = Clock::now();
  const auto deadline = started + timeout;
  const std::string where = fmt::format("{}:{}", topology.master_addr, topology.master_port);
  std::string last_cause;
  auto next_log = started + std::chrono::seconds(10);
  for (Clock::duration delay = std::chrono::milliseconds(100);;
       delay = std::min<Clock::duration>(delay * 2, std::chrono::seconds(2))) {
    const int fd = connect_tcp(topology.master_addr, topology.master_port, last_cause);
    if (fd >= 0) {
      ::close(fd);
      return fmt::format("master {} answers (after {:.1f}s)", where,
                         std::chrono::duration<double>(Clock::now() - started).count());
    }
    const auto now = Clock::now();
    if (now >= deadline) break;
    if (now >= next_log) {
      spdlog::info("preflight: waiting for the master {}: {}", where, last_cause);
      next_log = now + std::chrono::seconds(10);
    }
    std::this_thread::sleep_for(std::min(delay, deadline - now));  // the last try is at the deadline
  }
  fail(ExitCode::peer_lost, "the master {} did not answer within dist.timeout_s = {}s: {}; check MASTER_ADDR and "
       "MASTER_PORT (or PET_MASTER_*) and that the master pod is running", where, timeout.count(), last_cause);
}

std::uint64_t bytes_under(const fs::path& directory) {
  std::uint64_t bytes = 0;
  std::error_code error;
  for (auto it = fs::recursive_directory_iterator(directory, error); !error && it != fs::recursive_directory_iterator();
       it.increment(error)) {
    std::error_code ignored;
    if (it->is_regular_file(ignored)) bytes += it->file_size(ignored);
  }
  return bytes;
}

// Free space for the checkout and the S3 cache: the data not cached yet plus kWorkdirHeadroomBytes.
std::string check_disk(const fs::path& workdir, std::uint64_t s3_bytes) {
  const fs::path directory = existing_ancestor(workdir);
  struct statvfs stats {};
  if (::statvfs(directory.c_str(), &stats) != 0) {
    fail(ExitCode::storage, "cannot read the free space of {}: {}", directory.string(), std::strerror(errno));
  }
  const std::uint64_t free_bytes = static_cast<std::uint64_t>(stats.f_bavail) * stats.f_frsize;
  const std::uint64_t cached = bytes_under(fs::absolute(workdir) / "cache" / "s3");
  const std::uint64_t data = s3_bytes > cached ? s3_bytes - cached : 0;
  const std::uint64_t needed = data + kWorkdirHeadroomBytes;
  if (free_bytes < needed) {
    fail(ExitCode::storage, "the work directory {} has {} free but needs {} ({} of S3 data not cached yet and {} for "
         "checkouts and outputs): free space or give --workdir a larger volume", directory.string(),
         size_text(free_bytes), size_text(needed), size_text(data), size_text(kWorkdirHeadroomBytes));
  }
  return fmt::format("{} free in {}, {} needed", size_text(free_bytes), directory.string(), size_text(needed));
}

// /dev/shm: NCCL and PyTorch's DataLoader workers (command mode) keep buffers there; trainpoint's own
// Gloo training does not use it. Without a device plan (the launcher's variables are not valid), as gloo.
std::string check_shm(const spec::Spec& spec, const std::optional<dist::DevicePlan>& plan) {
  const bool command_mode = !spec.job.command.empty();
  const bool nccl = plan && plan->backend == dist::Backend::nccl;
  const int local_processes = plan ? plan->local_processes : 1;
  const std::uint64_t needed = nccl || command_mode ? kShmPerProcessBytes * static_cast<std::uint64_t>(local_processes) : 0;
  struct statvfs stats {};
  if (::statvfs("/dev/shm", &stats) != 0) {
    if (needed == 0) return "no /dev/shm, and none is needed";
    fail(ExitCode::usage, "/dev/shm is missing ({}) but {} is needed: mount a memory-backed /dev/shm (k8s.shm_size)",
         std::strerror(errno), size_text(needed));
  }
  const std::uint64_t free_bytes = static_cast<std::uint64_t>(stats.f_bavail) * stats.f_frsize;
  const std::uint64_t size = static_cast<std::uint64_t>(stats.f_blocks) * stats.f_frsize;
  if (free_bytes < needed) {
    fail(ExitCode::usage, "/dev/shm has {} free of {} but {} processes need {} ({} each with NCCL or in command mode): "
         "raise k8s.shm_size (--shm-size)", size_text(free_bytes), size_text(size), local_processes,
         size_text(needed), size_text(kShmPerProcessBytes));
  }
  return fmt::format("/dev/shm: {} free of {}, {} needed", size_text(free_bytes), size_text(size), size_text(needed));
}

}  // namespace

const CheckResult* Report::first_failure() const {
  for (const auto& check : checks) {
    if (check.status == Status::failed) return &check;
  }
  return nullptr;
}

namespace {

// Adds `result` to the report; whether it did not fail.
bool add(Report& report, CheckResult result) {
  report.checks.push_back(std::move(result));
  return report.checks.back().status != Status::failed;
}

// The checks after the spec's, skipped for `why`.
void skip_the_rest(Report& report, const std::string& why) {
  for (const char* name : {"data", "output", "resume", "gpus", "master", "disk", "shm"}) add(report, skipped(name, why));
}

// The git ref, then the spec; nullopt, with every later check skipped, when either fails.
std::optional<SpecInRepo> check_source(const Request& request, Report& report) {
  if (request.git.url.empty()) {
    add(report, skipped("git ref", "local spec, no repository"));
  } else if (!add(report, timed("git ref", [&] { return check_ref(request.git); }))) {
    add(report, skipped("spec", "the ref does not resolve"));
    skip_the_rest(report, "the ref does not resolve");
    return std::nullopt;
  }
  std::optional<SpecInRepo> loaded;
  const bool spec_ok = add(report, timed("spec", [&] {
                             loaded = request.load_spec();
                             return fmt::format("valid: job '{}'", loaded->spec.job.name);
                           }));
  if (spec_ok) return loaded;
  skip_the_rest(report, "the spec is not valid");
  return std::nullopt;
}

CheckResult resume_check(const SpecInRepo& loaded, const Request& request) {
  if (!loaded.spec.job.command.empty()) return skipped("resume", "command mode: the program keeps its own checkpoints");
  switch (loaded.spec.checkpoint.resume) {
    case spec::Resume::never: return skipped("resume", "checkpoint.resume = \"never\": the run starts afresh");
    case spec::Resume::automatic:
      if (!request.check_resume) return skipped("resume", "rank 0 checks it before its rendezvous");
      return timed("resume", [&] { return check_resume(loaded, request.workdir); });
  }
  spec::unhandled(loaded.spec.checkpoint.resume);
}

// The gpus and master checks, from the launcher's variables read as `run` reads them: when they are not valid
// the master check fails with the reason, and the gpus check, which needs them, is skipped. Returns the
// device plan, when there is one.
std::optional<dist::DevicePlan> check_placement(const spec::Spec& spec, const Request& request, Report& report) {
  std::optional<dist::Topology> topology;
  std::optional<Error> topology_error;
  try {
    topology = dist::read_topology(request.environment, static_cast<int>(spec.dist.nproc_per_node),
                                   request.visible_gpus);
  } catch (const Error& error) {
    topology_error = error;
  }
  std::optional<dist::DevicePlan> plan;
  if (topology) {
    add(report, timed("gpus", [&] {
          plan = dist::plan_devices(spec, *topology, request.visible_gpus);
          return dist::describe(*plan);
        }));
  } else {
    add(report, skipped("gpus", "the launcher's environment variables are not valid (see master)"));
  }
  add(report, timed("master", [&]() -> std::string {
        if (!topology) throw *topology_error;
        if (topology->world_size() == 1) return "single process: no rendezvous";
        if (topology->node_rank == 0) {
          return fmt::format("this node is the master ({}:{}), node 0 of {}", topology->master_addr,
                             topology->master_port, topology->nnodes);
        }
        return check_master(*topology, std::chrono::seconds(spec.dist.timeout_s));
      }));
  return plan;
}

}  // namespace

Report run(const Request& request) {
  Report report;
  const std::optional<SpecInRepo> loaded = check_source(request, report);
  if (!loaded) return report;
  const spec::Spec& spec = loaded->spec;
  if (!spec.job.command.empty()) {
    add(report, timed("command", [&] {
          return command::preflight_program(spec.job, loaded->root,
                                            command::environment_cache(request.git.cache_dir, request.workdir));
        }));
  }
  std::uint64_t s3_bytes = 0;
  add(report, timed("data", [&] { return check_data(*loaded, s3_bytes); }));
  add(report, timed("output", [&] {
        return s3::is_s3_url(spec.job.output) ? check_s3_output(spec) : check_output(request.workdir / spec.job.output);
      }));
  add(report, resume_check(*loaded, request));
  const std::optional<dist::DevicePlan> plan = check_placement(spec, request, report);
  add(report, timed("disk", [&] { return check_disk(request.workdir, s3_bytes); }));
  add(report, timed("shm", [&] { return check_shm(spec, plan); }));
  return report;
}

std::string format_table(const Report& report) {
  std::size_t width = 5;
  for (const auto& check : report.checks) width = std::max(width, check.name.size());
  std::string table = fmt::format("{:<{}}  {:<7}  {:>7}  {}\n", "CHECK", width, "STATUS", "SECONDS", "DETAIL");
  for (const auto& check : report.checks) {
    const char* status = check.status == Status::passed ? "ok" : check.status == Status::failed ? "FAILED" : "skipped";
    const std::string seconds = check.status == Status::skipped ? "-" : fmt::format("{:.2f}", check.seconds);
    table += fmt::format("{:<{}}  {:<7}  {:>7}  {}\n", check.name, width, status, seconds, check.detail);
  }
  return table;
}

void throw_first_failure(const Report& report) {
  if (const CheckResult* failure = report.first_failure()) {
    throw Error(*failure->code, fmt::format("preflight check '{}' failed: {}", failure->name, failure->detail));
  }
}

}  // namespace tp::preflight
