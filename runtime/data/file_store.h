// Where a dataset's files are read from: the local disk, or a local directory that S3 streaming fills on
// demand (runtime/storage). Datasets name files by their local path either way.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "common/error.h"

namespace tp::data {

// A store that cannot give its files at all (a corrupt or missing shard): not one bad file to skip, but data
// that is broken as a whole.
class BrokenStore : public Error {
 public:
  using Error::Error;
};

class FileStore {
 public:
  virtual ~FileStore() = default;
  // Regular files under `dir`, recursively, sorted. Throws tp::Error(data) when `dir` is not a directory.
  virtual std::vector<std::filesystem::path> list(const std::filesystem::path& dir) const = 0;
  // Whether `file` is one of the store's files (for a streaming store: listed, fetched or not).
  virtual bool exists(const std::filesystem::path& file) const = 0;
  // Thread-safe. Throws tp::Error(data) naming the file when it cannot be read.
  virtual std::string read(const std::filesystem::path& file) const = 0;
  // The files about to be read, in reading order: a streaming store fetches them ahead.
  virtual void will_read(const std::vector<std::filesystem::path>& /*files*/) const {}
  // Thread-safe. The file whole on the local disk, kept there until release(file), for files read in pieces
  // (shards): its local path. Throws tp::Error(data) naming the file when it cannot be had.
  virtual std::filesystem::path acquire(const std::filesystem::path& file) const = 0;
  virtual void release(const std::filesystem::path& /*file*/) const {}
  // The file's size in bytes. Throws tp::Error(data) naming the file when it does not exist.
  virtual std::uint64_t size(const std::filesystem::path& file) const = 0;
};

// Files on the local disk.
std::shared_ptr<const FileStore> local_files();

// Sorts as std::filesystem::path's operator< does (part by part), the order list() gives: by the strings with
// the separator made the lowest character, which is the same order without comparing every path's parts
// (slow for a million files).
void sort_paths(std::vector<std::filesystem::path>& paths);

}  // namespace tp::data
