// `trainpoint pack` and data.format = "shards": what pack writes (read back by WebDataset's own pipeline),
// that it is deterministic and survives being killed, packing from and to MinIO, training's reads of shards
// streamed through a bounded cache, and the errors of a corrupt shard, a missing shard, an index that does not
// match its shards and a shard set too small for the world size.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "common/digest.h"
#include "common/error.h"
#include "data/loader.h"
#include "data/sampler.h"
#include "data/shard_index.h"
#include "data/tar.h"
#include "s3/s3_server.h"
#include "s3/stage.h"
#include "spec/spec.h"
#include "storage/data_source.h"
#include "storage/pack.h"
#include "support/captured_log.h"
#include "support/fault_proxy.h"
#include "support/process.h"
#include "support/temp_dir.h"

namespace tp::storage {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::run_command;
using testing::S3Server;
using testing::shell_quote;

std::string file_bytes(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

// Every file of `directory` with its bytes' hash.
std::map<std::string, std::string> hashes(const fs::path& directory) {
  std::map<std::string, std::string> files;
  for (const auto& entry : fs::recursive_directory_iterator(directory)) {
    if (entry.is_regular_file()) files[entry.path().lexically_relative(directory).string()] = sha256_hex(file_bytes(entry.path()));
  }
  return files;
}

void make_images(const fs::path& out, int count, int classes = 3, const std::string& size = "48") {
  testing::run_checked(std::string(TP_MAKE_DATASET_BIN) + " images --out " + shell_quote(out.string()) +
                       " --classes " + std::to_string(classes) + " --count " + std::to_string(count) + " --size " +
                       size + " --format jpeg --seed 4");
}

PackRequest pack_request(const std::string& source, const std::string& destination, const fs::path& workdir) {
  PackRequest request;
  request.data = spec::load_string("[data]\nsource = \"x\"\n[model]\narch = \"mlp\"\n", {}, "t.toml").spec.data;
  request.data.source = source;
  request.destination = destination;
  request.shard_bytes = 64 << 10;
  request.workers = 2;
  request.workdir = workdir;
  return request;
}

data::ShardIndex read_index(const fs::path& directory) {
  return data::parse_shard_index(file_bytes(directory / data::kShardIndexFile), "index.json");
}

class Pack : public ::testing::Test {
 protected:
  testing::TempDir dir_;
};

// What pack wrote, read by WebDataset's own pipeline (read_with_webdataset.py): every source image once, byte
// for byte, with its folder's class, in shards of the size asked for, split 80/20 as training would split.
TEST_F(Pack, WebDatasetReadsEverySourceImageOnceWithItsClass) {
  make_images(dir_ / "images", 150);
  const PackResult result = pack(pack_request((dir_ / "images").string(), (dir_ / "shards").string(), dir_ / "work"));
  const data::ShardIndex index = read_index(dir_ / "shards");
  EXPECT_EQ(index.train.samples(), 120u);
  EXPECT_EQ(index.valid.samples(), 30u);
  EXPECT_GE(index.train.shards.size(), 2u) << "about 150 x 1.5 KB in shards of 64 KiB";
  EXPECT_EQ(result.written, index.train.shards.size() + index.valid.shards.size());
  for (const auto& shard : index.train.shards) {
    EXPECT_LE(shard.bytes, 64u << 10);
    EXPECT_EQ(shard.bytes, fs::file_size(dir_ / "shards" / shard.name));
  }
  EXPECT_FALSE(fs::exists(dir_ / "shards" / ".pack")) << "the records of a pack go once its index is written";

  // (class name, image hash) of every source file, against what WebDataset reads.
  std::multiset<std::pair<std::string, std::string>> source;
  for (const auto& entry : fs::recursive_directory_iterator(dir_ / "images")) {
    if (entry.is_regular_file()) {
      source.insert({entry.path().parent_path().filename().string(), sha256_hex(file_bytes(entry.path()))});
    }
  }
  const std::string output = testing::run_checked(
      shell_quote(testing::tools_python()) + " " + shell_quote(testing::source_dir() + "/tests/storage/read_with_webdataset.py") +
      " " + shell_quote((dir_ / "shards").string()));
  const json read = json::parse(output);
  std::multiset<std::pair<std::string, std::string>> packed;
  for (const char* set : {"train", "valid"}) {
    std::vector<double> targets;
    for (const json& sample : read.at(set)) {
      packed.insert({index.classes.at(sample.at("cls").get<std::size_t>()), sample.at("sha256").get<std::string>()});
      targets.push_back(sample.at("cls").get<double>());
      EXPECT_EQ(sample.at("width").get<int>(), 48) << "PIL decodes the image";
    }
    std::vector<double> indexed;
    for (const auto& shard : (std::string(set) == "train" ? index.train : index.valid).shards) {
      indexed.insert(indexed.end(), shard.targets.begin(), shard.targets.end());
    }
    EXPECT_EQ(targets, indexed) << set << ": index.json's targets are the .cls files, in order";
  }
  EXPECT_EQ(packed, source);
}

TEST_F(Pack, TheSameSourceAndSeedGiveTheSameBytesAndAnotherSeedAnotherOrder) {
  make_images(dir_ / "images", 60);
  pack(pack_request((dir_ / "images").string(), (dir_ / "a").string(), dir_ / "work"));
  PackRequest again = pack_request((dir_ / "images").string(), (dir_ / "b").string(), dir_ / "work");
  again.workers = 1;
  pack(again);
  EXPECT_EQ(hashes(dir_ / "a"), hashes(dir_ / "b"));
  PackRequest other = pack_request((dir_ / "images").string(), (dir_ / "c").string(), dir_ / "work");
  other.seed = 7;
  pack(other);
  EXPECT_NE(read_index(dir_ / "a").train.shards[0].crc32c, read_index(dir_ / "c").train.shards[0].crc32c);
}

// A real `trainpoint pack` killed with SIGKILL after some shards, then run again: it keeps what was written for
// the same plan and ends with the bytes of an uninterrupted pack; a changed plan writes everything again.
TEST_F(Pack, AKilledPackKeepsItsShardsWhenRunAgainAndEndsAsAnUninterruptedPack) {
  make_images(dir_ / "images", 400);
  pack(pack_request((dir_ / "images").string(), (dir_ / "reference").string(), dir_ / "work"));
  const std::string command = testing::trainpoint_binary() + " pack " + shell_quote((dir_ / "images").string()) + " " +
                              shell_quote((dir_ / "shards").string()) + " --shard-size-mb 0.0625 --seed 42 --workers 1";
  // Killed once its fourth shard is logged.
  const auto killed = run_command(
      "(" + command + " > " + shell_quote((dir_ / "pack.log").string()) + " 2>&1 & pid=$!; " +
      "for i in $(seq 600); do grep -q '(4 of' " + shell_quote((dir_ / "pack.log").string()) +
      " && break; sleep 0.01; done; kill -9 $pid; wait $pid; echo exit $?)");
  ASSERT_NE(killed.output.find("exit 137"), std::string::npos) << killed.output << testing::read_text(dir_ / "pack.log");
  ASSERT_FALSE(fs::exists(dir_ / "shards" / data::kShardIndexFile)) << "killed before its index";

  const auto resumed = run_command(command);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  std::smatch kept;
  ASSERT_TRUE(std::regex_search(resumed.output, kept, std::regex("([0-9]+) shards of an interrupted pack of the same plan are kept")))
      << resumed.output;
  EXPECT_GE(std::stoi(kept[1]), 4);
  EXPECT_EQ(hashes(dir_ / "shards"), hashes(dir_ / "reference"));

  // Another shard size is another plan: nothing is kept, and no shard of the larger set is left behind.
  const auto bigger = run_command(testing::trainpoint_binary() + " pack " + shell_quote((dir_ / "images").string()) +
                                  " " + shell_quote((dir_ / "shards").string()) + " --shard-size-mb 0.25");
  ASSERT_EQ(bigger.exit_code, 0) << bigger.output;
  EXPECT_EQ(bigger.output.find("are kept"), std::string::npos) << bigger.output;
  const data::ShardIndex index = read_index(dir_ / "shards");
  std::set<std::string> files;
  for (const auto& entry : fs::directory_iterator(dir_ / "shards")) files.insert(entry.path().filename().string());
  EXPECT_EQ(files.size(), index.train.shards.size() + index.valid.shards.size() + 1) << "the shards and index.json";
}

TEST_F(Pack, BadRequestsAreUsageErrorsNamingTheOption) {
  make_images(dir_ / "images", 20);
  const auto table = run_command(testing::trainpoint_binary() + " pack " + shell_quote((dir_ / "images").string()) +
                                 " " + shell_quote((dir_ / "out").string()) + " --format table_csv");
  EXPECT_EQ(table.exit_code, 2) << table.output;
  EXPECT_NE(table.output.find("--format table_csv: image_folder or image_csv"), std::string::npos) << table.output;
  const auto missing = run_command(testing::trainpoint_binary() + " pack " + shell_quote((dir_ / "none").string()) + " " +
                                   shell_quote((dir_ / "out").string()));
  EXPECT_EQ(missing.exit_code, 5) << missing.output;
  EXPECT_NE(missing.output.find((dir_ / "none").string()), std::string::npos) << missing.output;
}

class Shards : public ::testing::Test {
 protected:
  void SetUp() override {
    setenv("AWS_ENDPOINT_URL", server_.endpoint().c_str(), 1);
    setenv("AWS_ACCESS_KEY_ID", S3Server::kAccessKey, 1);
    setenv("AWS_SECRET_ACCESS_KEY", S3Server::kSecretKey, 1);
    spec_ = spec::load_string("[data]\nsource = \"x\"\nformat = \"shards\"\nimage_size = 24\nshuffle_buffer = 40\n"
                              "[model]\narch = \"mlp\"\n", {}, "test.toml").spec;
  }
  void TearDown() override {
    unsetenv("AWS_ENDPOINT_URL");
    unsetenv("AWS_ACCESS_KEY_ID");
    unsetenv("AWS_SECRET_ACCESS_KEY");
  }
  void upload(const fs::path& source, const std::string& destination) {
    s3::Client client(testing::test_connection(server_.endpoint()));
    s3::upload_with(client, source, destination);
  }
  // Opens the shards at `source` as rank `rank` of `world`.
  data::Datasets open(const std::string& source, int rank = 0, int world = 1) {
    spec_.data.source = source;
    Placement placement{dir_ / fmt::format("work-{}", rank), {}, rank};
    placement.topology.nnodes = world;
    placement.topology.rank = rank;
    return open_data(spec_.data, dir_.path(), placement, 7);
  }
  // The error of reading every training sample of `data` in its first epoch's order, or "" when there is none.
  std::string read_epoch(const data::Datasets& data) {
    const data::DistributedSampler sampler({data.train->size(), 0, 1, true, false, 7, data.train_shard_sizes,
                                            static_cast<std::size_t>(spec_.data.shuffle_buffer)});
    try {
      data::Loader loader(data.train, sampler.indices(0), 0, {8, 2});
      while (loader.next()) {
      }
    } catch (const Error& error) {
      EXPECT_EQ(error.code(), ExitCode::data) << error.what();
      return error.what();
    }
    return "";
  }

  S3Server server_;
  testing::TempDir dir_;
  spec::Spec spec_;
};

// Packed from MinIO to MinIO, then streamed: the samples decode as from local shards, each rank's first epoch
// reads its shards through a cache that stays within data.stream_cache_mb, and the index on disk is the same.
TEST_F(Shards, PackedFromAndToMinioAndStreamedWithinTheCacheAsFromLocalShards) {
  make_images(dir_ / "images", 300, 3, "160");
  upload(dir_ / "images", "s3://test-bucket/images");
  PackRequest request = pack_request("s3://test-bucket/images", "s3://test-bucket/packed", dir_ / "pack-work");
  request.shard_bytes = 1 << 20;
  pack(request);
  PackRequest local_request = pack_request((dir_ / "images").string(), (dir_ / "local").string(), dir_ / "pack-work-2");
  local_request.shard_bytes = 1 << 20;
  pack(local_request);

  spec_.data.stream_cache_mb = 3;
  const data::Datasets streamed = open("s3://test-bucket/packed");
  const data::Datasets local = open((dir_ / "local").string());
  ASSERT_EQ(streamed.train->size(), 240u);
  ASSERT_EQ(streamed.train_shard_sizes, local.train_shard_sizes);
  EXPECT_GE(streamed.train_shard_sizes.size(), 4u);
  const data::DistributedSampler sampler({240, 0, 1, true, false, 7, streamed.train_shard_sizes, 40});
  data::Loader streamed_loader(streamed.train, sampler.indices(0), 0, {8, 2});
  data::Loader local_loader(local.train, sampler.indices(0), 0, {8, 2});
  // The node's cache (shared by the ranks of work-0's node), named by the listing.
  std::vector<fs::path> caches;
  for (const auto& entry : fs::directory_iterator(dir_ / "work-0" / "cache" / "stream")) {
    if (entry.is_directory() && entry.path().filename().string().rfind("shards-", 0) == 0 &&
        entry.path().extension() != ".locks") {
      caches.push_back(entry.path());
    }
  }
  ASSERT_EQ(caches.size(), 1u);
  const fs::path cache = caches.front();
  EXPECT_TRUE(fs::exists(cache / "index.json"));
  std::uint64_t most_on_disk = 0;
  std::size_t samples = 0;
  while (auto batch = streamed_loader.next()) {
    const auto expected = local_loader.next();
    ASSERT_TRUE(expected.has_value());
    EXPECT_TRUE(torch::equal(batch->inputs, expected->inputs));
    EXPECT_TRUE(torch::equal(batch->targets, expected->targets));
    samples += static_cast<std::size_t>(batch->targets.size(0));
    most_on_disk = std::max(most_on_disk, testing::bytes_in(cache));
  }
  EXPECT_EQ(samples, 240u);
  // The bound: the capacity, plus a shard a waiting reader forces in.
  EXPECT_LE(most_on_disk, (3u << 20) + (1u << 20));
  EXPECT_GT(most_on_disk, 0u);
}

// Two ranks of one node (one workdir) streaming the same shards at once share the node's cache: each shard is
// downloaded once (GETs counted at a proxy in front of MinIO).
TEST_F(Shards, TwoRanksOfANodeDownloadEachShardOnce) {
  make_images(dir_ / "images", 300, 3, "160");
  PackRequest request = pack_request((dir_ / "images").string(), (dir_ / "packed").string(), dir_ / "pack-work");
  request.shard_bytes = 1 << 20;
  pack(request);
  upload(dir_ / "packed", "s3://test-bucket/packed");
  const testing::FaultProxy proxy(server_.port(), "[]");
  spec_.data.endpoint = proxy.endpoint();
  spec_.data.source = "s3://test-bucket/packed";
  std::vector<data::Datasets> ranks;
  for (int rank = 0; rank < 2; ++rank) {
    Placement placement{dir_ / "node", {}, rank};
    placement.topology.nproc_per_node = 2;
    placement.topology.rank = rank;
    placement.topology.local_rank = rank;
    ranks.push_back(open_data(spec_.data, dir_.path(), placement, 7));
  }
  std::vector<std::string> errors(2);
  std::vector<std::thread> readers;
  for (std::size_t rank = 0; rank < 2; ++rank) {
    readers.emplace_back([&, rank] { errors[rank] = read_epoch(ranks[rank]); });
  }
  for (auto& reader : readers) reader.join();
  EXPECT_EQ(errors, std::vector<std::string>(2));
  std::map<std::string, int> gets;
  std::istringstream log(proxy.requests());
  for (std::string method, path, range, fault; log >> method >> path >> range >> fault;) {
    if (method == "GET" && path.size() > 4 && path.substr(path.size() - 4) == ".tar") ++gets[path];
  }
  const data::ShardIndex index = read_index(dir_ / "packed");
  EXPECT_EQ(gets.size(), index.train.shards.size()) << proxy.requests();
  for (const auto& [path, count] : gets) EXPECT_EQ(count, 1) << path;
}

// A user's log holds what helps them: opening and reading healthy shards says once what was opened, and warns of
// nothing.
TEST_F(Shards, ReadingHealthyShardsSaysWhatWasOpenedAndWarnsOfNothing) {
  make_images(dir_ / "images", 120);
  pack(pack_request((dir_ / "images").string(), (dir_ / "shards").string(), dir_ / "pack-work"));
  testing::CapturedLog log;
  EXPECT_EQ(read_epoch(open((dir_ / "shards").string())), "");
  EXPECT_EQ(log.count("[warning]"), 0) << log.text();
  EXPECT_EQ(log.count("shards in "), 1) << log.text();
}

TEST_F(Shards, ACorruptShardIsNamedWithItsChecksum) {
  make_images(dir_ / "images", 120);
  pack(pack_request((dir_ / "images").string(), (dir_ / "shards").string(), dir_ / "pack-work"));
  const data::ShardIndex index = read_index(dir_ / "shards");
  const fs::path victim = dir_ / "shards" / index.train.shards[1].name;
  std::string bytes = file_bytes(victim);
  bytes[bytes.size() / 2] ^= 0x01;  // one bit inside an image
  testing::write_text(victim, bytes);
  upload(dir_ / "shards", "s3://test-bucket/corrupt");
  for (const std::string& source : {(dir_ / "shards").string(), std::string("s3://test-bucket/corrupt")}) {
    const std::string error = read_epoch(open(source));
    EXPECT_NE(error.find(index.train.shards[1].name + ": CRC32C "), std::string::npos) << error;
    EXPECT_NE(error.find("the shard is corrupt"), std::string::npos) << error;
  }
}

TEST_F(Shards, AMissingShardOrAnIndexThatDoesNotMatchItsShardsIsNamedBeforeTraining) {
  make_images(dir_ / "images", 120);
  pack(pack_request((dir_ / "images").string(), (dir_ / "shards").string(), dir_ / "pack-work"));
  const data::ShardIndex index = read_index(dir_ / "shards");
  upload(dir_ / "shards", "s3://test-bucket/missing");
  s3::Client client(testing::test_connection(server_.endpoint()));
  client.remove("test-bucket", "missing/" + index.valid.shards[0].name);
  try {
    open("s3://test-bucket/missing");
    FAIL() << "a missing shard was not noticed";
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), ExitCode::data);
    EXPECT_NE(std::string(error.what()).find("index.json lists " + index.valid.shards[0].name + ", which is missing"),
              std::string::npos) << error.what();
  }

  // Another pack's last (partly filled) shard under the name of a full one: the sizes differ.
  make_images(dir_ / "other", 200);
  pack(pack_request((dir_ / "other").string(), (dir_ / "other-shards").string(), dir_ / "pack-work-2"));
  const fs::path other = dir_ / "other-shards" / read_index(dir_ / "other-shards").train.shards.back().name;
  ASSERT_NE(fs::file_size(other), index.train.shards[0].bytes);
  fs::copy_file(other, dir_ / "shards" / index.train.shards[0].name, fs::copy_options::overwrite_existing);
  try {
    open((dir_ / "shards").string());
    FAIL() << "a shard of another pack was not noticed";
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), ExitCode::data);
    EXPECT_NE(std::string(error.what()).find(index.train.shards[0].name + ": "), std::string::npos) << error.what();
    EXPECT_NE(std::string(error.what()).find("the index does not match the shards"), std::string::npos) << error.what();
  }
}

TEST_F(Shards, ASetTooSmallForTheWorldSizeIsADataError) {
  make_images(dir_ / "images", 6, 3);
  PackRequest request = pack_request((dir_ / "images").string(), (dir_ / "shards").string(), dir_ / "pack-work");
  request.data.valid = 0.5;
  pack(request);
  EXPECT_EQ(open((dir_ / "shards").string(), 2, 3).train->size(), 3u);
  try {
    open((dir_ / "shards").string(), 3, 4);
    FAIL() << "4 ranks were given 3 samples";
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), ExitCode::data);
    EXPECT_NE(std::string(error.what()).find("3 training samples in 1 shards cannot give each of the 4 ranks one"),
              std::string::npos) << error.what();
  }
}

}  // namespace
}  // namespace tp::storage
