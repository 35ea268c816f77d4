// Where `trainpoint pack` writes its shards: a local directory or an S3 prefix, each shard written to a
// temporary file, then renamed there or uploaded. Torch-free.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>

#include "s3/credentials.h"

namespace tp::storage {

// Names are relative to the destination; "a/b" is b in its folder a.
class PackDestination {
 public:
  virtual ~PackDestination() = default;
  // The files there now with their sizes, by name (those in folders included).
  virtual std::map<std::string, std::uint64_t> existing() const = 0;
  virtual std::string read_text(const std::string& name) const = 0;
  virtual void write_text(const std::string& name, const std::string& text) const = 0;
  // Where a shard is written before it is verified.
  virtual std::filesystem::path temporary_for(const std::string& name) const = 0;
  // The verified `temporary` becomes `name` (renamed, or uploaded and deleted).
  virtual void put(const std::filesystem::path& temporary, const std::string& name) const = 0;
  // Removes a file, or an empty folder of a local directory; nothing when there is none.
  virtual void remove(const std::string& name) const = 0;
  virtual std::string describe(const std::string& name) const = 0;
};

// `destination`: a local directory (made if missing), or s3://bucket/prefix reached with `connection`, its
// uploads staged in `workdir`. Throws tp::Error (output) when the directory cannot be made.
std::unique_ptr<PackDestination> open_pack_destination(const std::string& destination,
                                                       const s3::ConnectionOptions& connection,
                                                       const std::filesystem::path& workdir);

}  // namespace tp::storage
