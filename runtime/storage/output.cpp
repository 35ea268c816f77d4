#include "storage/output.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>

#include <fmt/ranges.h>

#include "common/error.h"
#include "common/files.h"
#include "common/time.h"
#include "s3/client.h"
#include "s3/paths.h"
#include "s3/stage.h"
#include "storage/connection.h"
#include "storage/run_identity.h"

namespace tp::storage {

namespace fs = std::filesystem;

OutputLocation::OutputLocation(const spec::Spec& spec, const fs::path& workdir) : name_(spec.job.output) {
  if (!s3::is_s3_url(name_)) {
    local_dir_ = fs::absolute(workdir / name_);
    return;
  }
  const s3::S3Url url = s3::parse_s3_url(name_);
  bucket_ = url.bucket;
  prefix_ = s3::directory_prefix(url.key);
  local_dir_ = fs::absolute(workdir / "outputs" / bucket_ / prefix_);
  client_ = std::make_unique<s3::Client>(s3::resolve_connection(connection_options(spec.data)));
}

OutputLocation::~OutputLocation() = default;

std::size_t OutputLocation::fetch_for_resume(const std::string& run_key, std::int64_t keep) {
  if (!client_) return 0;
  const std::string run_checkpoints = "checkpoints/" + run_key + "/";
  std::vector<s3::ObjectInfo> checkpoints;
  std::vector<s3::DownloadItem> missing;
  bool model = false, record = false;
  for (const auto& object : client_->list(bucket_, prefix_).objects) {
    const std::string relative = object.key.substr(prefix_.size());
    const fs::path target = local_dir_ / s3::local_path_for_key(object.key, prefix_);
    model = model || relative == "model.pt";
    record = record || relative == "run.json";
    if (relative == "metrics.jsonl" || relative == "metrics.csv" || relative == "steps.jsonl" ||
        relative == "run.json") {
      if (!fs::exists(target)) missing.push_back({object, target});
    } else if (relative.rfind("checkpoints/", 0) == 0 && fs::path(relative).filename() == kIdentityFile) {
      if (!has_size(target, object.size)) missing.push_back({object, target});
    } else if (relative.rfind(run_checkpoints + kBestModelPrefix, 0) == 0) {
      if (!has_size(target, object.size)) missing.push_back({object, target});  // checkpoint.keep_best's model
    } else if (relative == run_checkpoints + kMlflowRunFile) {
      missing.push_back({object, target});  // a few bytes, and the copy on this disk may be another run's
    } else if (relative.rfind(run_checkpoints, 0) == 0 && fs::path(relative).extension() == ".ckpt") {
      checkpoints.push_back(object);
    }
  }
  remote_final_outputs_ = model && record;
  // Checkpoint names sort in training order (the listing is in key order); the newest `keep` are enough.
  if (checkpoints.size() > static_cast<std::size_t>(keep)) {
    checkpoints.erase(checkpoints.begin(), checkpoints.end() - keep);
  }
  for (const auto& object : checkpoints) {
    const fs::path target = local_dir_ / s3::local_path_for_key(object.key, prefix_);
    if (has_size(target, object.size)) continue;
    missing.push_back({object, target});
  }
  if (missing.empty()) return 0;
  std::vector<std::string> names;
  for (const auto& item : missing) names.push_back(item.object.key.substr(prefix_.size()));
  spdlog::info("fetching {} file(s) from {} to resume: {}", missing.size(), name_, fmt::join(names, ", "));
  client_->download(bucket_, missing);
  return missing.size();
}

bool OutputLocation::has_final_outputs() const {
  if (client_) return remote_final_outputs_;
  return fs::exists(local_dir_ / "model.pt") && fs::exists(local_dir_ / "run.json");
}

std::string OutputLocation::key_of(const fs::path& file) const {
  const fs::path relative = file.lexically_relative(local_dir_);
  if (relative.empty() || *relative.begin() == "..") {
    fail(ExitCode::internal, "{} is not in the output directory {}", file.string(), local_dir_.string());
  }
  return relative == "." ? prefix_ : prefix_ + relative.generic_string();
}

void OutputLocation::publish(const fs::path& file) const {
  if (!client_) return;
  s3::upload_with(*client_, file, "s3://" + bucket_ + "/" + key_of(file));
}

void OutputLocation::withdraw(const fs::path& file) const {
  if (!client_) return;
  client_->remove(bucket_, key_of(file));
}

namespace {

std::string read_holder(int fd) {
  std::string text(512, '\0');
  const ssize_t got = ::pread(fd, text.data(), text.size(), 0);
  text.resize(got > 0 ? static_cast<std::size_t>(got) : 0);
  while (!text.empty() && (text.back() == '\n' || text.back() == '\0')) text.pop_back();
  return text;
}

}  // namespace

OutputLock::OutputLock(const fs::path& directory) {
  std::error_code error;
  fs::create_directories(directory, error);
  const fs::path file = directory / ".trainpoint.lock";
  fd_ = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) fail(ExitCode::output, "job.output: cannot open {}: {}", file.string(), std::strerror(errno));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const std::string holder = read_holder(fd_);
    ::close(fd_);
    fail(ExitCode::output, "job.output {} is in use by another job ({}): wait for it to end, or give this job "
         "another job.output", directory.string(), holder.empty() ? "it is starting" : holder);
  }
  // Text left in the file is a job that ended without releasing it: killed, or its node lost.
  if (const std::string left = read_holder(fd_); !left.empty()) {
    spdlog::info("job.output {}: taking over the lock of a job that ended without releasing it ({})",
                 directory.string(), left);
  }
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  const std::string holder = fmt::format("host {}, pid {}, started {}\n", host, ::getpid(), utc_timestamp());
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, holder.data(), holder.size(), 0) < 0) {
    spdlog::warn("job.output: cannot record this job in {}: {}", file.string(), std::strerror(errno));
  }
}

OutputLock::~OutputLock() {
  if (fd_ < 0) return;
  // Emptied, not deleted: a job waiting to open the same file must lock the same file.
  if (::ftruncate(fd_, 0) != 0) spdlog::warn("job.output: cannot clear the lock file: {}", std::strerror(errno));
  ::close(fd_);
}

}  // namespace tp::storage
