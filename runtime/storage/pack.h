// `trainpoint pack SRC DEST`: an image_folder or image_csv source (local or s3://) into packed shards
// (docs/s3.md, "Packed shards"): tar shards of about a target size in the WebDataset layout, the training and
// validation sets split as training splits them, and index.json, written last. Shards are written in parallel,
// one sample in memory per worker, each to a temporary name, verified, then renamed (or uploaded); a pack that
// is run again after an interruption keeps the shards already written for the same plan (the same samples,
// seed and shard size), recorded beside them in .pack/. The same source and seed give the same bytes.
// Torch-free (tp_pack): the destinations are in pack_destination.h, the plan and what is kept in pack_plan.h,
// the shards' bytes in data/shard_writer.h; the command line in entrypoint/cli.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "data/shard_index.h"
#include "spec/spec.h"

namespace tp::storage {

struct PackRequest {
  std::string destination;  // a local directory or s3://bucket/prefix
  // What is packed, as a spec's [data] names it: source (local or s3://), format, target, task, valid,
  // valid_source, endpoint, credentials.
  spec::DataSpec data;
  std::uint64_t shard_bytes = 256ull << 20;
  std::uint64_t seed = 42;
  int workers = 1;
  std::filesystem::path workdir;  // temporary files: an s3:// source staged, shards before their upload
};

struct PackResult {
  data::ShardIndex index;
  std::size_t written = 0;  // shards written by this call
  std::size_t kept = 0;     // shards an earlier, interrupted call had written
};

// Throws tp::Error: usage (bad request), data (the source), network/storage/output (writing).
PackResult pack(const PackRequest& request);

}  // namespace tp::storage
