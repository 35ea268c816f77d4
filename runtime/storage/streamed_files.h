// Image files or shards read straight from S3 while training runs: a data::FileStore over the objects under
// a prefix, fetched ahead of the readers (in the order the loader announces) into a directory of bounded size:
// the rank's own, or the node's cache that its ranks share (s3/node_cache.h).
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "data/file_store.h"
#include "s3/client.h"
#include "s3/streaming.h"

namespace tp::storage {

class StreamedFiles final : public data::FileStore {
 public:
  // `objects[i]` appears as `directory / relative_paths[i]`. Files already in `directory` that are not among
  // the objects (fetched beforehand, such as a labels CSV) are read from disk.
  StreamedFiles(std::unique_ptr<s3::Client> client, std::string bucket, std::vector<s3::ObjectInfo> objects,
                const std::vector<std::filesystem::path>& relative_paths, std::filesystem::path directory,
                std::vector<std::filesystem::path> local_files, s3::PrefetchCache::Options options);
  // The objects of the node's cache `node`, whose client is `client`; local files as above, in its directory.
  StreamedFiles(std::unique_ptr<s3::Client> client, std::shared_ptr<s3::NodeCache> node,
                std::vector<std::filesystem::path> local_files, s3::PrefetchCache::Options options);

  std::vector<std::filesystem::path> list(const std::filesystem::path& dir) const override;
  bool exists(const std::filesystem::path& file) const override;
  std::string read(const std::filesystem::path& file) const override;
  void will_read(const std::vector<std::filesystem::path>& files) const override;
  std::filesystem::path acquire(const std::filesystem::path& file) const override;
  void release(const std::filesystem::path& file) const override;
  std::uint64_t size(const std::filesystem::path& file) const override;

  std::uint64_t bytes_on_disk() const { return cache_->bytes_on_disk(); }

 private:
  // Lists the objects' files beside the local ones.
  void add_objects(const std::vector<std::filesystem::path>& relative_paths, const std::vector<s3::ObjectInfo>& objects);

  std::unique_ptr<s3::Client> client_;  // used by cache_: declared first, destroyed last
  std::filesystem::path directory_;
  std::vector<std::filesystem::path> files_;  // every file under directory_, sorted
  std::unordered_map<std::string, std::size_t> object_of_;  // streamed file -> object index
  std::vector<std::uint64_t> sizes_;                        // of each object
  std::unique_ptr<s3::PrefetchCache> cache_;
};

}  // namespace tp::storage
