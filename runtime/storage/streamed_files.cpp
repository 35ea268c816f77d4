#include "storage/streamed_files.h"

#include <algorithm>

#include "common/files.h"

namespace tp::storage {

namespace fs = std::filesystem;

StreamedFiles::StreamedFiles(std::unique_ptr<s3::Client> client, std::string bucket,
                             std::vector<s3::ObjectInfo> objects, const std::vector<fs::path>& relative_paths,
                             fs::path directory, std::vector<fs::path> local_files,
                             s3::PrefetchCache::Options options)
    : client_(std::move(client)), directory_(std::move(directory)), files_(std::move(local_files)) {
  add_objects(relative_paths, objects);
  cache_ = std::make_unique<s3::PrefetchCache>(*client_, std::move(bucket), std::move(objects), relative_paths,
                                               directory_, options);
}

StreamedFiles::StreamedFiles(std::unique_ptr<s3::Client> client, std::shared_ptr<s3::NodeCache> node,
                             std::vector<fs::path> local_files, s3::PrefetchCache::Options options)
    : client_(std::move(client)), directory_(node->directory()), files_(std::move(local_files)) {
  std::vector<fs::path> relative_paths;
  std::vector<s3::ObjectInfo> objects;
  for (std::size_t i = 0; i < node->size(); ++i) {
    relative_paths.push_back(node->path(i).lexically_relative(directory_));
    objects.push_back(node->object(i));
  }
  add_objects(relative_paths, objects);
  cache_ = std::make_unique<s3::PrefetchCache>(std::move(node), options);
}

void StreamedFiles::add_objects(const std::vector<fs::path>& relative_paths,
                                const std::vector<s3::ObjectInfo>& objects) {
  for (std::size_t i = 0; i < relative_paths.size(); ++i) {
    const fs::path file = directory_ / relative_paths[i];
    object_of_.emplace(file.string(), i);
    files_.push_back(file);
    sizes_.push_back(objects[i].size);
  }
  data::sort_paths(files_);
}

std::vector<fs::path> StreamedFiles::list(const fs::path& dir) const {
  const fs::path relative = dir.lexically_relative(directory_);
  if (relative.empty() || *relative.begin() == "..") return data::local_files()->list(dir);
  std::vector<fs::path> under;
  for (const auto& file : files_) {
    const fs::path inside = file.lexically_relative(dir);
    if (!inside.empty() && *inside.begin() != "..") under.push_back(file);
  }
  if (under.empty()) fail(ExitCode::data, "{}: no such directory among the streamed objects", dir.string());
  return under;
}

bool StreamedFiles::exists(const fs::path& file) const {
  return object_of_.count(file.string()) > 0 || data::local_files()->exists(file);
}

std::string StreamedFiles::read(const fs::path& file) const {
  const fs::path local = acquire(file);
  struct Release {
    const StreamedFiles& files;
    const fs::path& file;
    ~Release() { files.release(file); }
  } release{*this, file};
  return read_file(local, ExitCode::data);
}

fs::path StreamedFiles::acquire(const fs::path& file) const {
  const auto found = object_of_.find(file.string());
  if (found == object_of_.end()) return data::local_files()->acquire(file);
  return cache_->acquire(found->second);
}

void StreamedFiles::release(const fs::path& file) const {
  const auto found = object_of_.find(file.string());
  if (found != object_of_.end()) cache_->release(found->second);
}

std::uint64_t StreamedFiles::size(const fs::path& file) const {
  const auto found = object_of_.find(file.string());
  if (found == object_of_.end()) return data::local_files()->size(file);
  return sizes_[found->second];
}

void StreamedFiles::will_read(const std::vector<fs::path>& files) const {
  std::vector<std::size_t> order;
  order.reserve(files.size());
  for (const auto& file : files) {
    const auto found = object_of_.find(file.string());
    if (found != object_of_.end()) order.push_back(found->second);
  }
  cache_->set_order(std::move(order));
}

}  // namespace tp::storage
