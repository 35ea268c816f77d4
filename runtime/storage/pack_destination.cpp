#include "storage/pack_destination.h"

#include "common/error.h"
#include "common/files.h"
#include "s3/client.h"
#include "s3/paths.h"

namespace tp::storage {

namespace fs = std::filesystem;

namespace {

class LocalDestination final : public PackDestination {
 public:
  explicit LocalDestination(fs::path directory) : directory_(std::move(directory)) {
    std::error_code error;
    fs::create_directories(directory_, error);
    if (error) fail(ExitCode::output, "{}: cannot be created: {}", directory_.string(), error.message());
  }
  std::map<std::string, std::uint64_t> existing() const override {
    std::map<std::string, std::uint64_t> files;
    for (const auto& entry : fs::recursive_directory_iterator(directory_)) {
      if (entry.is_regular_file()) {
        files[entry.path().lexically_relative(directory_).generic_string()] = entry.file_size();
      }
    }
    return files;
  }
  std::string read_text(const std::string& name) const override {
    return read_file(directory_ / name, ExitCode::output);
  }
  void write_text(const std::string& name, const std::string& text) const override {
    const fs::path file = directory_ / name;
    std::error_code error;
    fs::create_directories(file.parent_path(), error);
    if (error) {
      fail(ExitCode::output, "{}: cannot be created: {}", file.parent_path().string(), error.message());
    }
    write_file_atomic(file, text);
  }
  fs::path temporary_for(const std::string& name) const override {
    return temporary_sibling(directory_ / name);
  }
  void put(const fs::path& temporary, const std::string& name) const override {
    commit_file(temporary, directory_ / name);
  }
  void remove(const std::string& name) const override {
    std::error_code ignored;
    fs::remove(directory_ / name, ignored);
  }
  std::string describe(const std::string& name) const override { return (directory_ / name).string(); }

 private:
  fs::path directory_;
};

class S3Destination final : public PackDestination {
 public:
  S3Destination(const std::string& url, const s3::ConnectionOptions& connection, fs::path workdir)
      : url_(s3::parse_s3_url(url)),
        prefix_(s3::directory_prefix(url_.key)),
        client_(std::make_unique<s3::Client>(s3::resolve_connection(connection))),
        workdir_(std::move(workdir)) {
    fs::create_directories(workdir_);
  }
  std::map<std::string, std::uint64_t> existing() const override {
    std::map<std::string, std::uint64_t> files;
    for (const auto& object : client_->list(url_.bucket, prefix_).objects) {
      files[object.key.substr(prefix_.size())] = object.size;
    }
    return files;
  }
  std::string read_text(const std::string& name) const override {
    const fs::path local = workdir_ / ("read-" + fs::path(name).filename().string());
    const auto object = client_->head(url_.bucket, prefix_ + name);
    if (!object) fail(ExitCode::output, "{}: not found", describe(name));
    client_->download(url_.bucket, {{*object, local}});
    std::string text = read_file(local, ExitCode::output);
    fs::remove(local);
    return text;
  }
  void write_text(const std::string& name, const std::string& text) const override {
    const fs::path local = temporary_sibling(workdir_ / fs::path(name).filename());
    write_file_atomic(local, text);
    put(local, name);
  }
  fs::path temporary_for(const std::string& name) const override {
    return temporary_sibling(workdir_ / name);
  }
  void put(const fs::path& temporary, const std::string& name) const override {
    client_->upload(url_.bucket, {{temporary, prefix_ + name}});
    std::error_code ignored;
    fs::remove(temporary, ignored);
  }
  void remove(const std::string& name) const override { client_->remove(url_.bucket, prefix_ + name); }
  std::string describe(const std::string& name) const override {
    return "s3://" + url_.bucket + "/" + prefix_ + name;
  }

 private:
  s3::S3Url url_;
  std::string prefix_;
  // Shared by the workers, which upload at once: a Client's calls may overlap (s3/client.h).
  std::unique_ptr<s3::Client> client_;
  fs::path workdir_;
};

}  // namespace

std::unique_ptr<PackDestination> open_pack_destination(const std::string& destination,
                                                       const s3::ConnectionOptions& connection,
                                                       const fs::path& workdir) {
  if (s3::is_s3_url(destination)) return std::make_unique<S3Destination>(destination, connection, workdir);
  return std::make_unique<LocalDestination>(destination);
}

}  // namespace tp::storage
