#include "storage/output.h"

#include <spdlog/spdlog.h>

#include <fmt/ranges.h>

#include "common/error.h"
#include "common/files.h"
#include "s3/client.h"
#include "s3/paths.h"
#include "s3/stage.h"
#include "storage/data_source.h"

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

std::size_t OutputLocation::fetch_for_resume(std::int64_t keep) const {
  if (!client_) return 0;
  std::vector<s3::ObjectInfo> checkpoints;
  std::vector<s3::DownloadItem> missing;
  for (const auto& object : client_->list(bucket_, prefix_).objects) {
    const std::string relative = object.key.substr(prefix_.size());
    if (relative == "metrics.jsonl" || relative == "metrics.csv" || relative == "steps.jsonl") {
      if (!fs::exists(local_dir_ / relative)) missing.push_back({object, local_dir_ / relative});
    } else if (relative.rfind("checkpoints/", 0) == 0 && fs::path(relative).extension() == ".ckpt") {
      checkpoints.push_back(object);
    }
  }
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

}  // namespace tp::storage
