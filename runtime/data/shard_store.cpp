#include "data/shard_store.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

#include "common/crc32c.h"
#include "common/error.h"
#include "common/files.h"
#include "data/image.h"
#include "data/tar.h"

namespace tp::data {

namespace fs = std::filesystem;

namespace {

// A shard's image members by position (sample key - the shard's first key), as found in the file on disk.
struct ShardMembers {
  dev_t device = 0;  // the file these were read from: a shard evicted and fetched again is checked again
  ino_t inode = 0;
  std::vector<TarMember> images;
};

// The samples of a shard set as files <directory>/<shard>/<key>: each read takes the whole shard from `base`
// (on disk, or fetched into its cache) and reads the member at its offset. A shard is checked against the
// index the first time each copy of it is read: size, CRC32C, and one image per sample key.
class ShardStore final : public FileStore {
 public:
  ShardStore(std::shared_ptr<const FileStore> base, fs::path directory, const ShardIndex& index)
      : base_(std::move(base)), directory_(std::move(directory)) {
    for (const ShardSet* set : {&index.train, &index.valid}) {
      std::uint64_t first = 0;
      for (const ShardInfo& shard : set->shards) {
        shards_.emplace(shard.name, Shard{shard, directory_ / shard.name, first, std::make_unique<Entry>()});
        first += shard.samples;
      }
    }
  }

  std::vector<fs::path> list(const fs::path& dir) const override { return base_->list(dir); }
  bool exists(const fs::path& file) const override { return base_->exists(file); }
  fs::path acquire(const fs::path& file) const override { return base_->acquire(file); }
  void release(const fs::path& file) const override { base_->release(file); }
  std::uint64_t size(const fs::path& file) const override { return base_->size(file); }

  std::string read(const fs::path& sample) const override {
    const auto [shard_name, key] = split_sample(sample);
    const Shard& shard = shard_of(shard_name, sample);
    const fs::path& shard_file = shard.file;
    fs::path local;
    try {
      local = base_->acquire(shard_file);
    } catch (const Error& error) {
      if (error.code() != ExitCode::data) throw;
      throw BrokenStore(error.code(), error.what());
    }
    struct Release {
      const FileStore& store;
      const fs::path& file;
      ~Release() { store.release(file); }
    } release{*base_, shard_file};
    const TarMember member = image_member(shard, local, key, shard_file);
    std::string bytes(member.size, '\0');
    const int fd = ::open(local.c_str(), O_RDONLY | O_CLOEXEC);
    const auto offset = static_cast<off_t>(member.offset);
    const ssize_t got = fd < 0 ? -1 : ::pread(fd, bytes.data(), bytes.size(), offset);
    if (fd >= 0) ::close(fd);
    if (got != static_cast<ssize_t>(bytes.size())) {
      throw BrokenStore(ExitCode::data, fmt::format("{}: {} bytes at {} could not be read",
                                                    shard_file.string(), member.size, member.offset));
    }
    return bytes;
  }

  // The shards in the order their samples come first.
  void will_read(const std::vector<fs::path>& samples) const override {
    std::vector<fs::path> shards;
    std::unordered_set<std::string_view> seen;
    for (const fs::path& sample : samples) {
      const std::string_view shard_name = split_sample(sample).first;
      if (seen.insert(shard_name).second) shards.push_back(shard_of(shard_name, sample).file);
    }
    base_->will_read(shards);
  }

 private:
  struct Entry {
    std::mutex mutex;
    ShardMembers members;
  };
  struct Shard {
    ShardInfo info;
    fs::path file;                // <directory>/<shard name>
    std::uint64_t first_sample;  // of the set: the key of its first sample
    std::unique_ptr<Entry> entry;
  };

  // A sample <directory>/<shard>/<key> as its shard's name and its key: string operations, for every sample
  // read (fs::path's are several times slower).
  static std::pair<std::string_view, std::string_view> split_sample(const fs::path& sample) {
    const std::string_view path = sample.native();
    const std::size_t key_start = path.rfind('/') + 1;  // npos + 1 == 0: no folder at all
    const std::size_t shard_end = key_start > 0 ? key_start - 1 : 0;
    const std::size_t shard_start = shard_end > 0 ? path.rfind('/', shard_end - 1) + 1 : 0;
    return {path.substr(shard_start, shard_end - shard_start), path.substr(key_start)};
  }

  const Shard& shard_of(std::string_view shard_name, const fs::path& sample) const {
    const auto found = shards_.find(std::string(shard_name));
    if (found == shards_.end()) {
      fail(ExitCode::internal, "{}: not a sample of a shard in the index", sample.string());
    }
    return found->second;
  }

  // A shard that fails its check fails every read of it, as a BrokenStore: not a bad image to skip.
  TarMember image_member(const Shard& shard, const fs::path& local, std::string_view key,
                         const fs::path& shard_file) const {
    struct stat status {};
    if (::stat(local.c_str(), &status) != 0) {
      throw BrokenStore(ExitCode::data, fmt::format("{}: {}", shard_file.string(), std::strerror(errno)));
    }
    std::lock_guard<std::mutex> lock(shard.entry->mutex);
    ShardMembers& members = shard.entry->members;
    if (members.images.empty() || members.device != status.st_dev || members.inode != status.st_ino) {
      try {
        members = check_shard(shard, local, status);
      } catch (const Error& error) {
        throw BrokenStore(error.code(), error.what());
      }
    }
    const auto sample = parse_shard_sample_key(key);
    if (!sample) fail(ExitCode::internal, "{}: '{}' is not a sample key", shard_file.string(), key);
    return members.images.at(*sample - shard.first_sample);
  }

  ShardMembers check_shard(const Shard& shard, const fs::path& local, const struct stat& status) const {
    const ShardInfo& info = shard.info;
    const std::string name = (directory_ / info.name).string();
    if (static_cast<std::uint64_t>(status.st_size) != info.bytes) {
      fail(ExitCode::data, "{}: {} bytes, but index.json says {}: the index does not match the shards "
           "(upload the index and shards of one `trainpoint pack` together)", name, status.st_size,
           info.bytes);
    }
    // One mapping for the checksum and the scan: a shard is read once, without copies, before its first
    // image.
    const MappedFile mapped(local, ExitCode::data);
    const std::uint32_t crc = crc32c(mapped.bytes());
    if (crc != info.crc32c) {
      fail(ExitCode::data, "{}: CRC32C {:08x}, but index.json says {:08x}: the shard is corrupt (pack it "
           "again, or upload it again from where it was packed)", name, crc, info.crc32c);
    }
    ShardMembers members;
    members.device = status.st_dev;
    members.inode = status.st_ino;
    members.images.resize(info.samples);
    std::vector<bool> found(info.samples, false);
    for (TarMember& member : scan_tar(mapped.bytes(), name)) {
      const fs::path member_name(member.name);
      if (!has_image_extension(member_name)) continue;
      const std::uint64_t sample = parse_shard_sample_key(member_name.stem().string()).value_or(~0ull);
      if (sample < shard.first_sample || sample >= shard.first_sample + info.samples) {
        fail(ExitCode::data, "{}: image '{}' is not one of the shard's samples {} to {} in index.json", name,
             member.name, shard_sample_key(shard.first_sample),
             shard_sample_key(shard.first_sample + info.samples - 1));
      }
      members.images[sample - shard.first_sample] = std::move(member);
      found[sample - shard.first_sample] = true;
    }
    for (std::uint64_t i = 0; i < info.samples; ++i) {
      if (!found[i]) {
        fail(ExitCode::data, "{}: no image for sample {} of index.json", name,
             shard_sample_key(shard.first_sample + i));
      }
    }
    return members;
  }

  std::shared_ptr<const FileStore> base_;
  fs::path directory_;
  std::unordered_map<std::string, Shard> shards_;
};

}  // namespace

std::shared_ptr<const FileStore> shard_store(std::shared_ptr<const FileStore> base, fs::path directory,
                                             const ShardIndex& index) {
  return std::make_shared<const ShardStore>(std::move(base), std::move(directory), index);
}

}  // namespace tp::data
