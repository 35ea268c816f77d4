// A packed shard set's index.json on arbitrary bytes (it comes from S3, written by whoever wrote the prefix),
// and the same bytes as a tar archive. Invariants: parse_shard_index returns or throws tp::Error(data); an
// index it returns holds as many targets as samples in every shard, classification targets that are class
// indices, and writes out to JSON that parses back to the same shards; scan_tar returns or throws
// tp::Error(data), and every member it returns lies inside the file.
#include <cstdint>
#include <cstdio>
#include <string>

#include "data/shard_index.h"
#include "data/tar.h"
#include "fuzz_support.h"

using namespace tp;

namespace {

void check_set(const data::ShardSet& set, const data::ShardIndex& index, const std::string& input) {
  for (const data::ShardInfo& shard : set.shards) {
    TP_FUZZ_CHECK(shard.targets.size() == shard.samples, input);
    TP_FUZZ_CHECK(!shard.name.empty() && shard.name.find('/') == std::string::npos, input);
    if (index.task == "classification") {
      for (const double target : shard.targets) {
        TP_FUZZ_CHECK(target >= 0 && target < static_cast<double>(index.classes.size()), input);
      }
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::quiet_logs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  data::ShardIndex index;
  if (fuzz::returns_or_fails_with(ExitCode::data, [&] { index = data::parse_shard_index(input, "index.json"); })) {
    check_set(index.train, index, input);
    check_set(index.valid, index, input);
    data::ShardIndex again;
    const std::string written = data::shard_index_json(index);
    TP_FUZZ_CHECK(fuzz::returns_or_fails_with(ExitCode::data, [&] { again = data::parse_shard_index(written, "again"); }),
                  written);
    TP_FUZZ_CHECK(data::shard_index_json(again) == written, written);
  }

  std::vector<data::TarMember> members;
  if (fuzz::returns_or_fails_with(ExitCode::data, [&] { members = data::scan_tar(input, "fuzzed.tar"); })) {
    for (const data::TarMember& member : members) {
      TP_FUZZ_CHECK(member.offset + member.size <= size, input);
    }
  }
  return 0;
}
