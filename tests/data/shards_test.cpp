// Packed shards' parts without S3: the tar members shards are made of, index.json, and the epoch order that
// reads them shard by shard through a shuffle buffer while keeping the sampler's exact resume.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <iostream>
#include <map>
#include <numeric>
#include <regex>
#include <set>

#include "common/error.h"
#include "data/sampler.h"
#include "data/shard_index.h"
#include "data/tar.h"
#include "support/process.h"
#include "support/temp_dir.h"

namespace tp::data {
namespace {

namespace fs = std::filesystem;

std::string write_archive(const fs::path& file, const std::vector<std::pair<std::string, std::string>>& members) {
  std::string bytes;
  for (const auto& [name, data] : members) append_tar_member(bytes, name, data);
  bytes += tar_end();
  testing::write_text(file, bytes);
  return bytes;
}

TEST(Tar, MembersAreFoundAtTheirOffsetsAndGnuTarListsThem) {
  testing::TempDir dir;
  const std::string large(1500, 'x');
  const std::string bytes = write_archive(dir / "a.tar", {{"s000000000.jpg", large}, {"s000000000.cls", "3"}, {"empty", ""}});
  EXPECT_EQ(bytes.size() % kTarBlock, 0u);
  EXPECT_EQ(bytes.size(), tar_member_size(1500) + tar_member_size(1) + tar_member_size(0) + 2 * kTarBlock);
  const std::vector<TarMember> members = scan_tar(bytes, "a.tar");
  ASSERT_EQ(members.size(), 3u);
  EXPECT_EQ(members[0].name, "s000000000.jpg");
  EXPECT_EQ(bytes.substr(members[0].offset, members[0].size), large);
  EXPECT_EQ(bytes.substr(members[1].offset, members[1].size), "3");
  EXPECT_EQ(members[2].size, 0u);
  // GNU tar reads the archive as ustar, with the fixed metadata.
  const auto listing = testing::run_command("tar --numeric-owner -tvf " + (dir / "a.tar").string());
  ASSERT_EQ(listing.exit_code, 0) << listing.output;
  EXPECT_TRUE(std::regex_search(listing.output, std::regex("-rw-r--r-- 0/0 +1 1970-01-01 00:00 s000000000.cls")))
      << listing.output;
  EXPECT_EQ(testing::run_command("tar -xOf " + (dir / "a.tar").string() + " s000000000.jpg").output, large);
}

TEST(Tar, ADamagedOrTruncatedArchiveIsAnErrorNamingTheFileAndTheByte) {
  testing::TempDir dir;
  std::string bytes = write_archive(dir / "a.tar", {{"one.jpg", std::string(700, 'a')}, {"two.jpg", "b"}});
  std::string damaged = bytes;
  damaged[tar_member_size(700) + 3] ^= 0x20;  // the second header's name
  try {
    scan_tar(damaged, "damaged.tar");
    FAIL() << "a damaged header was read";
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), ExitCode::data);
    EXPECT_NE(std::string(error.what()).find("damaged.tar: no tar header at byte 1536"), std::string::npos) << error.what();
  }
  EXPECT_THROW(scan_tar(bytes.substr(0, 1024), "short.tar"), Error);
  // The first member says it is 1 GiB long (size field at byte 124; its header checksum made right again: the
  // sum of the header's bytes with the checksum field, bytes 148-155, counted as spaces).
  std::string oversized = bytes;
  oversized.replace(124, 11, "10000000000");
  std::fill(oversized.begin() + 148, oversized.begin() + 156, ' ');
  const unsigned sum = std::accumulate(oversized.begin(), oversized.begin() + 512, 0u,
                                       [](unsigned total, char c) { return total + static_cast<unsigned char>(c); });
  oversized.replace(148, 7, fmt::format("{:06o}", sum) + '\0');
  try {
    scan_tar(oversized, "oversized.tar");
    FAIL() << "a member past the end was read";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("oversized.tar: member 'one.jpg' at byte 0 runs past the end"),
              std::string::npos) << error.what();
  }
  EXPECT_THROW(append_tar_member(bytes, std::string(101, 'n'), "x"), Error);
}

TEST(ShardIndex, WhatIsWrittenIsReadBackAndABadIndexNamesTheFileAndTheShard) {
  ShardIndex index;
  index.task = "classification";
  index.classes = {"cat", "dog"};
  index.train.shards = {{"train-000000.tar", 2, 4096, 0xdeadbeef, {0, 1}}, {"train-000001.tar", 1, 3072, 7, {1}}};
  index.valid.shards = {{"valid-000000.tar", 1, 2048, 9, {0}}};
  const ShardIndex read = parse_shard_index(shard_index_json(index), "index.json");
  EXPECT_EQ(read.classes, index.classes);
  ASSERT_EQ(read.train.shards.size(), 2u);
  EXPECT_EQ(read.train.shards[0].crc32c, 0xdeadbeefu);
  EXPECT_EQ(read.train.shards[1].targets, std::vector<double>{1});
  EXPECT_EQ(read.train.samples(), 3u);
  EXPECT_EQ(read.valid.bytes(), 2048u);

  const auto message = [](const std::string& text) {
    try {
      parse_shard_index(text, "s3://b/p/index.json");
    } catch (const Error& error) {
      EXPECT_EQ(error.code(), ExitCode::data);
      return std::string(error.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message("{").find("s3://b/p/index.json: not JSON"), std::string::npos);
  EXPECT_NE(message(R"({"format": "mds"})").find("not an index `trainpoint pack` wrote"), std::string::npos);
  index.train.shards[1].targets = {1, 0};
  EXPECT_NE(message(shard_index_json(index)).find("train shard train-000001.tar: 1 samples but 2 targets"),
            std::string::npos);
  index.train.shards[1].targets = {2};
  EXPECT_NE(message(shard_index_json(index)).find("target 2 is not a class index"), std::string::npos);
  index.train.shards[1].targets = {1};
  index.train.shards[1].name = "../x.tar";
  EXPECT_NE(message(shard_index_json(index)).find("is not a file name beside the index"), std::string::npos);

  // Counts and checksums a JSON number or string can hold but a shard cannot (the fuzzer's 1e75 among them).
  index.train.shards[1].name = "train-000001.tar";
  const std::string good = shard_index_json(index);
  const auto refused_with = [&](const std::string& from, const std::string& to, const std::string& expected) {
    std::string text = good;
    const std::size_t at = text.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    const std::string error = message(text.replace(at, from.size(), to));
    EXPECT_NE(error.find(expected), std::string::npos) << error;
  };
  refused_with("\"samples\":1,", "\"samples\":1e75,", "\"samples\" is 1e+75, not a whole number of 0 or more");
  refused_with("\"samples\":1,", "\"samples\":-1,", "\"samples\" is -1,");
  refused_with("\"bytes\":3072", "\"bytes\":3072.5", "\"bytes\" is 3072.5,");
  refused_with("\"seed\":0", "\"seed\":\"7\"", "\"seed\" is string,");
  refused_with("\"crc32c\":\"00000007\"", "\"crc32c\":\"-7\"", "\"crc32c\" is \"-7\", not 8 hex digits");
  refused_with("\"format\":\"trainpoint-shards\"", "\"format\":2", "\"format\" is not \"trainpoint-shards\"");
  refused_with("\"version\":1", "\"version\":1e75", "version 1e+75 (this trainpoint reads version 1");
}

SamplerOptions shards_of(std::vector<std::size_t> sizes, std::size_t buffer, int rank = 0, int world = 1) {
  SamplerOptions options;
  options.dataset_size = std::accumulate(sizes.begin(), sizes.end(), std::size_t{0});
  options.rank = rank;
  options.world_size = world;
  options.seed = 3;
  options.shard_sizes = std::move(sizes);
  options.shuffle_buffer = buffer;
  return options;
}

// The shard each sample of 10 shards of 100 is in.
std::size_t shard_of(std::size_t sample) { return sample / 100; }

// The sample key is written and read in one place (shard_index.h): what is written reads back, and nothing
// else is a key.
TEST(ShardIndex, ASampleKeyReadsBackAndOtherNamesAreNoKeys) {
  EXPECT_EQ(shard_sample_key(42), "s000000042");
  EXPECT_EQ(parse_shard_sample_key("s000000042"), 42u);
  EXPECT_EQ(parse_shard_sample_key(shard_sample_key(999999999)), 999999999u);
  for (const char* name : {"", "s", "s00000004", "s0000000042", "x000000042", "s00000004a", "s+00000042"}) {
    EXPECT_FALSE(parse_shard_sample_key(name)) << name;
  }
}

TEST(ShardOrder, EachEpochTakesEverySampleOnceShardByShardInANewOrder) {
  const SamplerOptions options = shards_of(std::vector<std::size_t>(10, 100), 1);
  const std::vector<std::size_t> first = epoch_order(options, 0);
  ASSERT_EQ(first.size(), 1000u);
  EXPECT_EQ(std::set<std::size_t>(first.begin(), first.end()).size(), 1000u);
  // A buffer of one: each shard whole, in its own order.
  std::vector<std::size_t> shards;
  for (std::size_t i = 0; i < first.size(); i += 100) {
    shards.push_back(shard_of(first[i]));
    for (std::size_t j = 0; j < 100; ++j) EXPECT_EQ(first[i + j], shards.back() * 100 + j);
  }
  std::vector<std::size_t> next_shards;
  const std::vector<std::size_t> second = epoch_order(options, 1);
  for (std::size_t i = 0; i < second.size(); i += 100) next_shards.push_back(shard_of(second[i]));
  EXPECT_NE(shards, next_shards) << "the shards come in a new order each epoch";
  EXPECT_EQ(epoch_order(options, 1), second) << "from (seed, epoch) alone";
}

TEST(ShardOrder, BlocksOfTheShuffleBufferMixSamplesFromTheFewShardsTheySpan) {
  const std::vector<std::size_t> order = epoch_order(shards_of(std::vector<std::size_t>(10, 100), 150), 0);
  EXPECT_EQ(std::set<std::size_t>(order.begin(), order.end()).size(), 1000u);
  // Mixed: consecutive samples are seldom neighbours in their shard.
  std::size_t neighbours = 0;
  for (std::size_t i = 1; i < order.size(); ++i) neighbours += order[i] == order[i - 1] + 1;
  EXPECT_LT(neighbours, 50u);
  // Local: each block of 150 takes its samples from the 2 or 3 shards it spans, all of them from the shard
  // stream's positions 150 k to 150 (k + 1).
  for (std::size_t start = 0; start < order.size(); start += 150) {
    std::set<std::size_t> shards;
    for (std::size_t j = start; j < std::min(order.size(), start + 150); ++j) shards.insert(shard_of(order[j]));
    EXPECT_LE(shards.size(), 3u) << "block at " << start;
  }
}

// On one node the order does not depend on the world size: an epoch stopped on two ranks resumes on three
// with no layouts said.
TEST(ShardOrder, RanksOfOneNodeDealTheSameOrderSoAnEpochResumesAtAnotherWorldSize) {
  const std::vector<std::size_t> sizes = {37, 100, 64, 5, 90};
  const std::vector<std::size_t> order = epoch_order(shards_of(sizes, 40), 2);
  const auto on_one_node = [&](int rank, int world) {
    SamplerOptions options = shards_of(sizes, 40, rank, world);
    options.ranks_per_node = world;
    return DistributedSampler(options);
  };
  // Two ranks trained 60 samples each, then three ranks take the rest: every sample once, padding aside.
  std::multiset<std::size_t> trained;
  for (int rank = 0; rank < 2; ++rank) {
    const auto mine = on_one_node(rank, 2).indices(2);
    trained.insert(mine.begin(), mine.begin() + 60);
  }
  EXPECT_EQ(trained, std::multiset<std::size_t>(order.begin(), order.begin() + 120));
  for (int rank = 0; rank < 3; ++rank) {
    const auto rest = on_one_node(rank, 3).indices(2, 120);
    trained.insert(rest.begin(), rest.end());
  }
  EXPECT_EQ(std::set<std::size_t>(trained.begin(), trained.end()).size(), 296u);
  EXPECT_EQ(trained.size(), 297u) << "one sample repeated so that 3 ranks take 59 each";
}

// A job of `world` ranks in nodes of `per_node`, of the shards `sizes`: every rank's samples of `epoch` from
// `first` on, under `layouts` (empty: the job's own).
std::vector<std::vector<std::size_t>> shares_of(const std::vector<std::size_t>& sizes, std::size_t buffer, int world,
                                                int per_node, std::int64_t epoch, std::size_t first = 0,
                                                const std::vector<RankLayout>& layouts = {}) {
  std::vector<std::vector<std::size_t>> shares;
  for (int rank = 0; rank < world; ++rank) {
    SamplerOptions options = shards_of(sizes, buffer, rank, world);
    options.ranks_per_node = per_node;
    shares.push_back(DistributedSampler(options).indices(epoch, first, layouts));
  }
  return shares;
}

// The shard of each sample, for shards of `sizes` in dataset order.
std::vector<std::size_t> shard_of_samples(const std::vector<std::size_t>& sizes) {
  std::vector<std::size_t> shard;
  for (std::size_t i = 0; i < sizes.size(); ++i) shard.insert(shard.end(), sizes[i], i);
  return shard;
}

// The shards each node reads: node = rank / per_node.
std::vector<std::set<std::size_t>> shards_per_node(const std::vector<std::vector<std::size_t>>& shares, int per_node,
                                                   const std::vector<std::size_t>& shard, std::size_t first = 0,
                                                   std::size_t count = SIZE_MAX) {
  std::vector<std::set<std::size_t>> read(shares.size() / static_cast<std::size_t>(per_node));
  for (std::size_t rank = 0; rank < shares.size(); ++rank) {
    const auto& share = shares[rank];
    for (std::size_t i = first; i < std::min(share.size(), first + count); ++i) {
      read[rank / static_cast<std::size_t>(per_node)].insert(shard[share[i]]);
    }
  }
  return read;
}

// How many shards more than one node reads.
std::size_t shared_shards(const std::vector<std::set<std::size_t>>& read) {
  std::map<std::size_t, int> readers;
  for (const auto& node : read) {
    for (const std::size_t shard : node) ++readers[shard];
  }
  return static_cast<std::size_t>(std::count_if(readers.begin(), readers.end(), [](const auto& entry) { return entry.second > 1; }));
}

std::vector<std::size_t> uneven_shards(std::size_t count) {
  std::vector<std::size_t> sizes;
  for (std::size_t i = 0; i < count; ++i) sizes.push_back(60 + (i * 37) % 90);
  return sizes;
}

// 2 nodes x 4 ranks: each node reads its own half of the shards (one shard cut between them, read by both),
// every rank the same number of samples, every sample once (the padding to equal shares aside), and a new
// deal each epoch.
TEST(NodeOrder, EachNodeReadsItsOwnShardsAndEveryRankItsShareOfEverySampleOnce) {
  const std::vector<std::size_t> sizes = uneven_shards(40);
  const std::vector<std::size_t> shard = shard_of_samples(sizes);
  const std::size_t samples = shard.size();
  for (const std::int64_t epoch : {0, 1}) {
    const auto shares = shares_of(sizes, 100, 8, 4, epoch);
    std::multiset<std::size_t> trained;
    for (const auto& share : shares) {
      EXPECT_EQ(share.size(), (samples + 7) / 8);
      trained.insert(share.begin(), share.end());
    }
    EXPECT_EQ(std::set<std::size_t>(trained.begin(), trained.end()).size(), samples);
    EXPECT_EQ(trained.size(), (samples + 7) / 8 * 8) << "only the padding to equal shares is trained twice";
    const auto read = shards_per_node(shares, 4, shard);
    EXPECT_LE(shared_shards(read), 2u) << "the shard cut between the nodes, and one the padding takes";
    EXPECT_GE(read[0].size(), 19u);
    EXPECT_GE(read[1].size(), 19u);
    // Reading: a node's ranks are together in one or two shards at a time (those the block of 100 spans).
    const auto first_block = shards_per_node(shares, 4, shard, 0, 25);
    EXPECT_LE(first_block[0].size(), 3u);
  }
  EXPECT_NE(shards_per_node(shares_of(sizes, 100, 8, 4, 0), 4, shard)[0],
            shards_per_node(shares_of(sizes, 100, 8, 4, 1), 4, shard)[0])
      << "each epoch deals the shards anew";
}

// One node's order does not depend on how many ranks it has: the order of a run before orders were dealt to
// nodes (kept in no checkpoint) is one node's.
TEST(NodeOrder, OneNodesOrderIsTheSameForAnyNumberOfRanks) {
  const std::vector<std::size_t> sizes = uneven_shards(12);
  const auto order = epoch_order(shards_of(sizes, 50), 3);
  for (const int world : {2, 3, 8}) {
    SamplerOptions options = shards_of(sizes, 50, 0, world);
    options.ranks_per_node = world;
    EXPECT_EQ(epoch_order(options, 3), order) << world;
  }
}

// An epoch stopped on 2 nodes x 2 ranks, resumed on 3 x 1, stopped again, resumed on 1 x 4: every sample
// once (padding aside), and in each stretch each node reads its own shards.
TEST(NodeOrder, AnEpochResumedOnOtherNodesTrainsWhatIsLeftOnceEachNodeReadingItsOwnShards) {
  const std::vector<std::size_t> sizes = uneven_shards(30);
  const std::vector<std::size_t> shard = shard_of_samples(sizes);
  const std::size_t samples = shard.size();
  std::multiset<std::size_t> trained;
  std::vector<RankLayout> layouts = {{0, 4, 2}};
  const auto first = shares_of(sizes, 64, 4, 2, 5);
  for (const auto& share : first) trained.insert(share.begin(), share.begin() + 150);
  EXPECT_LE(shared_shards(shards_per_node(first, 2, shard, 0, 150)), 1u);

  layouts.push_back({600, 3, 1});
  const auto second = shares_of(sizes, 64, 3, 1, 5, 600, layouts);
  for (const auto& share : second) trained.insert(share.begin(), share.begin() + 200);
  EXPECT_LE(shared_shards(shards_per_node(second, 1, shard, 0, 200)), 2u + 3u)
      << "the cuts between the 3 nodes, and shards the first stretch left parts of";

  layouts.push_back({1200, 4, 4});
  const auto third = shares_of(sizes, 64, 4, 4, 5, 1200, layouts);
  for (const auto& share : third) trained.insert(share.begin(), share.end());
  EXPECT_EQ(std::set<std::size_t>(trained.begin(), trained.end()).size(), samples);
  EXPECT_EQ(trained.size(), 1200 + (samples - 1200 + 3) / 4 * 4) << "only the padding to equal shares";
  // The same stretches give the same order on every rank, and in the same epoch again.
  EXPECT_EQ(epoch_order(shards_of(sizes, 64), 5, layouts), epoch_order(shards_of(sizes, 64), 5, layouts));
}

// How well the order mixes, against one node's (every rank reading every shard): the distinct shards in each
// global step of 8 x 16 samples, and in 100 consecutive samples of one rank. 40 shards of 60 to 150 samples,
// blocks of 256 (ctest -R NodeOrder.HowWell -V prints the figures; docs/s3.md has them).
TEST(NodeOrder, HowWellTheOrderMixesShardsAgainstOneNodesOrder) {
  const std::vector<std::size_t> sizes = uneven_shards(40);
  const std::vector<std::size_t> shard = shard_of_samples(sizes);
  const auto mixing = [&](int per_node) {
    const auto shares = shares_of(sizes, 256, 8, per_node, 0);
    double per_step = 0, per_rank_window = 0;
    std::size_t steps = 0, windows = 0;
    for (std::size_t first = 0; first + 16 <= shares[0].size(); first += 16, ++steps) {
      std::set<std::size_t> in_step;
      for (const auto& share : shares) {
        for (std::size_t i = first; i < first + 16; ++i) in_step.insert(shard[share[i]]);
      }
      per_step += static_cast<double>(in_step.size());
    }
    for (std::size_t first = 0; first + 100 <= shares[0].size(); first += 100, ++windows) {
      std::set<std::size_t> in_window;
      for (std::size_t i = first; i < first + 100; ++i) in_window.insert(shard[shares[0][i]]);
      per_rank_window += static_cast<double>(in_window.size());
    }
    return std::make_pair(per_step / static_cast<double>(steps), per_rank_window / static_cast<double>(windows));
  };
  const auto [one_node_step, one_node_window] = mixing(8);
  const auto [two_nodes_step, two_nodes_window] = mixing(4);
  std::cout << fmt::format("distinct shards per global step of 8 x 16: one node {:.2f}, 2 x 4 {:.2f}; per 100 "
                           "samples of rank 0: one node {:.2f}, 2 x 4 {:.2f}\n",
                           one_node_step, two_nodes_step, one_node_window, two_nodes_window);
  EXPECT_GT(two_nodes_step, one_node_step) << "a step's samples come from two nodes' shards";
  EXPECT_GE(two_nodes_window, 1.0);
}

}  // namespace
}  // namespace tp::data
