#include "data/shard_writer.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <utility>

#include "common/crc32c.h"
#include "common/error.h"
#include "common/files.h"
#include "data/tar.h"

namespace tp::data {

namespace fs = std::filesystem;

namespace {

std::string extension_of(const fs::path& file) {
  std::string extension = file.extension().string().substr(1);
  std::transform(extension.begin(), extension.end(), extension.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  return extension;
}

// The label file of a sample: KEY.cls (the class index, as WebDataset's ImageNet shards have it) or KEY.json.
std::pair<std::string, std::string> label_member(const std::string& key, double target, bool classification) {
  if (classification) return {key + ".cls", std::to_string(static_cast<std::int64_t>(target))};
  return {key + ".json", nlohmann::json{{"target", target}}.dump()};
}

std::uint32_t file_crc32c(const fs::path& file, std::uint64_t& bytes) {
  std::ifstream in(file, std::ios::binary);
  std::string buffer(1 << 20, '\0');
  std::uint32_t crc = 0;
  bytes = 0;
  while (in.read(buffer.data(), static_cast<std::streamsize>(buffer.size())) || in.gcount() > 0) {
    crc = crc32c(std::string_view(buffer.data(), static_cast<std::size_t>(in.gcount())), crc);
    bytes += static_cast<std::uint64_t>(in.gcount());
  }
  return crc;
}

// A sample's image and label members: one sample in memory at a time.
std::string sample_members(const ShardSample& sample, const std::string& key, bool classification) {
  const std::string bytes = read_file(sample.file, ExitCode::data);
  if (bytes.size() != sample.size) {
    fail(ExitCode::data, "{}: {} bytes, {} when the pack was planned: the source changed while it was packed",
         sample.file.string(), bytes.size(), sample.size);
  }
  std::string members;
  append_tar_member(members, key + "." + extension_of(sample.file), bytes);
  const auto [label_name, label] = label_member(key, sample.target, classification);
  append_tar_member(members, label_name, label);
  return members;
}

}  // namespace

std::uint64_t shard_sample_bytes(const ShardSample& sample, bool classification) {
  const std::string label = label_member("", sample.target, classification).second;
  return tar_member_size(sample.size) + tar_member_size(label.size());
}

ShardInfo write_shard(const fs::path& file, const std::string& name, std::uint64_t first_key,
                      const std::vector<ShardSample>& samples, bool classification) {
  ShardInfo info;
  info.name = name;
  info.samples = samples.size();
  {
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    if (!out) fail(ExitCode::output, "{}: cannot be written", file.string());
    const auto emit = [&](const std::string& chunk) {
      out.write(chunk.data(), static_cast<std::streamsize>(chunk.size()));
      info.crc32c = crc32c(chunk, info.crc32c);
      info.bytes += chunk.size();
    };
    for (std::size_t i = 0; i < samples.size(); ++i) {
      emit(sample_members(samples[i], shard_sample_key(first_key + i), classification));
      info.targets.push_back(samples[i].target);
    }
    emit(tar_end());
    out.flush();
    if (!out) fail(write_failure_class(errno), "{}: write failed: {}", file.string(), std::strerror(errno));
  }
  std::uint64_t bytes = 0;
  const std::uint32_t crc = file_crc32c(file, bytes);
  if (bytes != info.bytes || crc != info.crc32c) {
    fail(ExitCode::storage, "{}: {} bytes with CRC32C {:08x} on disk, {} with {:08x} written", file.string(),
         bytes, crc, info.bytes, info.crc32c);
  }
  return info;
}

}  // namespace tp::data
