// Tar archives as packed shards use them (the WebDataset layout: one sample's files share a key, KEY.jpg and
// KEY.cls): POSIX ustar members of regular files with fixed metadata (mode 0644, owner 0, time 0), so the same
// samples always make the same bytes, and the scan of an archive that a shard reader needs (each member's
// name, data offset and size). Names are at most 100 bytes (no prefix field, no pax headers). Torch-free.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tp::data {

inline constexpr std::uint64_t kTarBlock = 512;

// One member: its 512-byte header, then `data`, padded with zeros to a whole block. Appended to `out`.
// Throws tp::Error (usage) for a name longer than 100 bytes.
void append_tar_member(std::string& out, const std::string& name, std::string_view data);
// The end of an archive: two zero blocks.
std::string tar_end();
// The bytes append_tar_member adds for `data_size` bytes of data.
std::uint64_t tar_member_size(std::uint64_t data_size);

struct TarMember {
  std::string name;
  std::uint64_t offset = 0;  // of the data in the archive
  std::uint64_t size = 0;
};

// The regular-file members of the archive `archive` (its bytes), in order. Throws tp::Error (data) naming
// `name` and the byte offset of a damaged or truncated header.
std::vector<TarMember> scan_tar(std::string_view archive, const std::string& name);

}  // namespace tp::data
