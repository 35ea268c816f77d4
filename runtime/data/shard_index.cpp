#include "data/shard_index.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cmath>

#include "common/error.h"

namespace tp::data {

namespace {

using nlohmann::json;

ShardSet parse_set(const json& value, const std::string& where, const std::string& name, const ShardIndex& index) {
  ShardSet set;
  for (const json& item : value.at("shards")) {
    ShardInfo shard;
    shard.name = item.at("name").get<std::string>();
    shard.samples = item.at("samples").get<std::uint64_t>();
    shard.bytes = item.at("bytes").get<std::uint64_t>();
    shard.crc32c = static_cast<std::uint32_t>(std::stoul(item.at("crc32c").get<std::string>(), nullptr, 16));
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

std::string shard_sample_key(std::uint64_t sample) { return fmt::format("s{:09d}", sample); }

ShardIndex parse_shard_index(std::string_view text, const std::string& where) {
  const json document = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (document.is_discarded() || !document.is_object()) {
    fail(ExitCode::data, "{}: not JSON: a shard index is the index.json `trainpoint pack` writes", where);
  }
  if (document.value("format", "") != kShardIndexFormat) {
    fail(ExitCode::data, "{}: \"format\" is not \"{}\": not an index `trainpoint pack` wrote", where, kShardIndexFormat);
  }
  if (document.value("version", 0) != kShardIndexVersion) {
    fail(ExitCode::data, "{}: version {} (this trainpoint reads version {}: pack the data again)", where,
         document.value("version", 0), kShardIndexVersion);
  }
  try {
    ShardIndex index;
    index.task = document.at("task").get<std::string>();
    if (index.task != "classification" && index.task != "regression") {
      fail(ExitCode::data, "{}: task '{}': classification or regression", where, index.task);
    }
    index.classes = document.value("classes", std::vector<std::string>{});
    index.source = document.value("source", "");
    index.seed = document.value("seed", std::uint64_t{0});
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
