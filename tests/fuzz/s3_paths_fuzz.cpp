// Object keys to local paths, on arbitrary bytes: "PREFIX\0KEY" (or a KEY alone, under no prefix).
// Invariants: a key is mapped to exactly its text after the prefix, as a relative path whose every
// segment is a plain name, so it never leaves the destination; or it is rejected with tp::Error(data)
// naming the key. Also: s3:// URLs parse or fail with usage; sharding gives every object to one rank.
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "fuzz_support.h"
#include "s3/paths.h"

using namespace tp;
namespace fs = std::filesystem;

namespace {

void check_key(const std::string& key, const std::string& prefix) {
  fs::path relative;
  const bool under_prefix = key.compare(0, prefix.size(), prefix) == 0;
  try {
    relative = s3::local_path_for_key(key, prefix);
  } catch (const Error& error) {
    const std::string message = error.what();
    TP_FUZZ_CHECK(error.code() == ExitCode::data, message);
    TP_FUZZ_CHECK(message.find("S3 key '") == 0, message);
    return;
  } catch (const std::exception& error) {
    fuzz::violated("an exception other than tp::Error escaped local_path_for_key", error.what());
  }
  TP_FUZZ_CHECK(under_prefix, "a key outside the prefix was mapped: " + key);
  const std::string rest = key.substr(prefix.size());
  TP_FUZZ_CHECK(relative.generic_string() == rest, key + " -> " + relative.generic_string());
  TP_FUZZ_CHECK(relative.is_relative() && !relative.has_root_path(), key);
  TP_FUZZ_CHECK(relative.lexically_normal() == relative, key);
  const fs::path destination = "/destination/root";
  const fs::path joined = (destination / relative).lexically_normal();
  const auto mismatch = std::mismatch(destination.begin(), destination.end(), joined.begin(), joined.end());
  TP_FUZZ_CHECK(mismatch.first == destination.end() && joined != destination, key + " escapes to " + joined.string());
  for (const auto& segment : relative) {
    const std::string name = segment.string();
    TP_FUZZ_CHECK(!name.empty() && name != "." && name != ".." && name.size() <= 255, key);
    TP_FUZZ_CHECK(name.rfind(".trainpoint-s3", 0) != 0 && !s3::is_temporary_download(name), key);
    for (unsigned char c : name) TP_FUZZ_CHECK(c >= 0x20 && c != 0x7F && c != '/', key);
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::quiet_logs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto parts = fuzz::split_input(data, size, 2);
  if (parts.size() == 2) {
    check_key(parts[1], parts[0]);
  } else {
    check_key(parts[0], "");
  }

  const std::string whole(reinterpret_cast<const char*>(data), size);
  s3::S3Url url;
  if (fuzz::returns_or_fails_with(ExitCode::usage, [&] { url = s3::parse_s3_url(whole); })) {
    TP_FUZZ_CHECK(!url.bucket.empty() && url.bucket.find('/') == std::string::npos, whole);
    TP_FUZZ_CHECK("s3://" + url.bucket + (whole.size() > 5 + url.bucket.size() ? "/" + url.key : "") == whole, whole);
  }

  // Sharding: objects sized from the input's bytes, split between 1-8 ranks.
  std::vector<s3::ObjectInfo> objects;
  for (std::size_t i = 0; i + 1 < std::min<std::size_t>(size, 64); ++i) {
    objects.push_back({std::to_string(i), static_cast<std::uint64_t>(data[i]) << (data[i + 1] % 40), ""});
  }
  const int world = size == 0 ? 1 : 1 + data[size - 1] % 8;
  const auto shares = s3::shard_by_bytes(objects, world);
  TP_FUZZ_CHECK(shares.size() == static_cast<std::size_t>(world), whole);
  std::vector<int> owners(objects.size(), 0);
  for (const auto& share : shares) {
    TP_FUZZ_CHECK(std::is_sorted(share.begin(), share.end()), whole);
    for (const std::size_t index : share) {
      TP_FUZZ_CHECK(index < objects.size(), whole);
      ++owners[index];
    }
  }
  TP_FUZZ_CHECK(std::all_of(owners.begin(), owners.end(), [](int n) { return n == 1; }), whole);
  return 0;
}
