// Where the training data comes from: a local path as it is, or an s3:// source staged into the node's
// cache before training, or streamed into a bounded per-rank cache while training reads it.
#pragma once

#include <cstdint>
#include <filesystem>

#include "data/dataset.h"
#include "dist/topology.h"
#include "s3/credentials.h"
#include "spec/spec.h"

namespace tp::storage {

// This process's place in the job and its working directory (caches live under it).
struct Placement {
  std::filesystem::path workdir;
  dist::Topology topology;
  int rank = 0;
};

// Opens the spec's data; relative local paths are taken from `root` (the checkout).
// Throws tp::Error: data (nothing there), network/storage (S3 failures), usage (credentials).
data::Datasets open_data(const spec::DataSpec& spec, const std::filesystem::path& root, const Placement& placement,
                         std::uint64_t seed);

// Command mode: the local path of `data.source` for the user's program, an s3:// source staged first
// (every object, shared by the ranks of the node).
std::filesystem::path local_data_for_command(const spec::DataSpec& spec, const std::filesystem::path& root,
                                             const Placement& placement);

}  // namespace tp::storage
