#include "data/shard_index.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <stdexcept>

#include "common/error.h"

namespace tp::data {

namespace {

using nlohmann::json;

// nlohmann's get<std::uint64_t>() casts whatever number it finds (undefined for 1e75, -1 wraps), so a
// count from a file someone else wrote is checked to be a whole number of 0 or more first.
std::uint64_t count_value(const json& value, std::string_view key) {
  if (!value.is_number_unsigned()) {
    const std::string found = value.is_number() ? value.dump() : std::string(value.type_name());
    throw std::invalid_argument(fmt::format("\"{}\" is {}, not a whole number of 0 or more", key, found));
  }
  return value.get<std::uint64_t>();
}

// `trainpoint pack` writes a CRC32C as 8 hex digits; std::stoul would take a sign, spaces or a longer number.
std::uint32_t crc32c_value(const json& value) {
  const std::string text = value.get<std::string>();
  if (text.size() != 8 || text.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos) {
    throw std::invalid_argument(fmt::format("\"crc32c\" is \"{}\", not 8 hex digits", text));
  }
  return static_cast<std::uint32_t>(std::stoul(text, nullptr, 16));
}

ShardSet parse_set(const json& value, const std::string& where, const std::string& name, const ShardIndex& index) {
  ShardSet set;
  for (const json& item : value.at("shards")) {
    ShardInfo shard;
    shard.name = item.at("name").get<std::string>();
    shard.samples = count_value(item.at("samples"), "samples");
    shard.bytes = count_value(item.at("bytes"), "bytes");
    shard.crc32c = crc32c_value(item.at("crc32c"));
    shard.targets = item.at("targets").get<std::vector<double>>();
    const auto context = [&] { return fmt::format("{}: {} shard {}", where, name, shard.name); };
    if (shard.name.empty() || shard.name.find('/') != std::string::npos || shard.name.front() == '.') {
      fail(ExitCode::data, "{}: '{}' is not a file name beside the index", context(), shard.name);
    }
    if (shard.targets.size() != shard.samples) {
      fail(ExitCode::data, "{}: {} samples but {} targets", context(), shard.samples, shard.targets.size());
    }
    if (index.task == "classification") {
      for (const double target : shard.targets) {
        if (target < 0 || target >= static_cast<double>(index.classes.size()) || target != std::floor(target)) {
          fail(ExitCode::data, "{}: target {} is not a class index (0 to {})", context(), target,
               index.classes.size() - 1);
        }
      }
    }
    set.shards.push_back(std::move(shard));
  }
  return set;
}

json set_json(const ShardSet& set) {
  json shards = json::array();
  for (const ShardInfo& shard : set.shards) {
    shards.push_back({{"name", shard.name},
                      {"samples", shard.samples},
                      {"bytes", shard.bytes},
                      {"crc32c", fmt::format("{:08x}", shard.crc32c)},
                      {"targets", shard.targets}});
  }
  return {{"samples", set.samples()}, {"bytes", set.bytes()}, {"shards", shards}};
}

}  // namespace

std::uint64_t ShardSet::samples() const {
  std::uint64_t total = 0;
  for (const ShardInfo& shard : shards) total += shard.samples;
  return total;
}

std::uint64_t ShardSet::bytes() const {
  std::uint64_t total = 0;
  for (const ShardInfo& shard : shards) total += shard.bytes;
  return total;
}

namespace {
constexpr std::size_t kSampleKeyDigits = 9;
}  // namespace

std::string shard_sample_key(std::uint64_t sample) {
  return fmt::format("s{:0{}d}", sample, kSampleKeyDigits);
}

std::optional<std::uint64_t> parse_shard_sample_key(std::string_view key) {
  if (key.size() != 1 + kSampleKeyDigits || key[0] != 's') return std::nullopt;
  std::uint64_t sample = 0;
  for (const char digit : key.substr(1)) {
    if (digit < '0' || digit > '9') return std::nullopt;
    sample = sample * 10 + static_cast<std::uint64_t>(digit - '0');
  }
  return sample;
}

ShardIndex parse_shard_index(std::string_view text, const std::string& where) {
  const json document = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (document.is_discarded() || !document.is_object()) {
    fail(ExitCode::data, "{}: not JSON: a shard index is the index.json `trainpoint pack` writes", where);
  }
  try {
    if (document.value("format", json()) != kShardIndexFormat) {
      fail(ExitCode::data, "{}: \"format\" is not \"{}\": not an index `trainpoint pack` wrote", where,
           kShardIndexFormat);
    }
    const json version = document.value("version", json());
    if (!version.is_number_unsigned() || version.get<std::uint64_t>() != kShardIndexVersion) {
      fail(ExitCode::data, "{}: version {} (this trainpoint reads version {}: pack the data again)", where,
           version.dump(), kShardIndexVersion);
    }
    ShardIndex index;
    index.task = document.at("task").get<std::string>();
    if (index.task != "classification" && index.task != "regression") {
      fail(ExitCode::data, "{}: task '{}': classification or regression", where, index.task);
    }
    index.classes = document.value("classes", std::vector<std::string>{});
    index.source = document.value("source", "");
    index.seed = document.contains("seed") ? count_value(document.at("seed"), "seed") : 0;
    index.train = parse_set(document.at("train"), where, "train", index);
    if (document.contains("valid")) index.valid = parse_set(document.at("valid"), where, "valid", index);
    if (index.train.shards.empty()) fail(ExitCode::data, "{}: no training shards", where);
    return index;
  } catch (const Error&) {
    throw;
  } catch (const std::exception& error) {  // nlohmann's type and range errors, std::stoul's
    fail(ExitCode::data, "{}: not a shard index as `trainpoint pack` writes it: {}", where, error.what());
  }
}

std::string shard_index_json(const ShardIndex& index) {
  json document = {{"format", kShardIndexFormat},
                   {"version", kShardIndexVersion},
                   {"task", index.task},
                   {"classes", index.classes},
                   {"source", index.source},
                   {"seed", index.seed},
                   {"layout", "webdataset: KEY.jpg or KEY.png with KEY.cls (class index) or KEY.json (target)"},
                   {"train", set_json(index.train)}};
  if (!index.valid.shards.empty()) document["valid"] = set_json(index.valid);
  return document.dump() + "\n";
}

}  // namespace tp::data
