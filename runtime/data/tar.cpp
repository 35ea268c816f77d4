#include "data/tar.h"

#include <algorithm>
#include <cstring>

#include "common/error.h"

namespace tp::data {

namespace {

// ustar header fields: offset and length.
constexpr std::size_t kName = 0, kNameLength = 100;
constexpr std::size_t kMode = 100, kUid = 108, kGid = 116, kSize = 124, kMtime = 136, kChecksum = 148;
constexpr std::size_t kType = 156, kMagic = 257;

// `value` as `width - 1` octal digits and a NUL, as tar writes numbers.
void put_octal(char* field, std::size_t width, std::uint64_t value) {
  for (std::size_t i = width - 1; i-- > 0;) {
    field[i] = static_cast<char>('0' + (value & 7));
    value >>= 3;
  }
  field[width - 1] = '\0';
}

std::uint64_t header_checksum(const char* header) {
  std::uint64_t sum = 0;
  for (std::size_t i = 0; i < kTarBlock; ++i) {
    // The checksum field counts as eight spaces.
    sum += (i >= kChecksum && i < kChecksum + 8) ? ' ' : static_cast<unsigned char>(header[i]);
  }
  return sum;
}

// An octal number field (NUL- or space-terminated, leading spaces allowed); none if it is not one.
bool read_octal(const char* field, std::size_t width, std::uint64_t& value) {
  value = 0;
  std::size_t i = 0;
  while (i < width && field[i] == ' ') ++i;
  bool digits = false;
  for (; i < width && field[i] >= '0' && field[i] <= '7'; ++i) {
    value = value * 8 + static_cast<std::uint64_t>(field[i] - '0');
    digits = true;
  }
  return digits && (i == width || field[i] == '\0' || field[i] == ' ');
}

}  // namespace

std::uint64_t tar_member_size(std::uint64_t data_size) {
  return kTarBlock + (data_size + kTarBlock - 1) / kTarBlock * kTarBlock;
}

void append_tar_member(std::string& out, const std::string& name, std::string_view data) {
  if (name.empty() || name.size() > kNameLength) {
    fail(ExitCode::usage, "tar member name '{}': 1 to {} bytes", name, kNameLength);
  }
  char header[kTarBlock] = {};
  std::memcpy(header + kName, name.data(), name.size());
  put_octal(header + kMode, 8, 0644);
  put_octal(header + kUid, 8, 0);
  put_octal(header + kGid, 8, 0);
  put_octal(header + kSize, 12, data.size());
  put_octal(header + kMtime, 12, 0);
  header[kType] = '0';
  std::memcpy(header + kMagic, "ustar\0" "00", 8);
  put_octal(header + kChecksum, 7, header_checksum(header));  // six digits, a NUL, and the space after
  header[kChecksum + 7] = ' ';
  out.append(header, kTarBlock);
  out.append(data);
  out.append(static_cast<std::size_t>(tar_member_size(data.size()) - kTarBlock - data.size()), '\0');
}

std::string tar_end() { return std::string(2 * kTarBlock, '\0'); }

std::vector<TarMember> scan_tar(std::string_view archive, const std::string& name) {
  std::vector<TarMember> members;
  std::uint64_t offset = 0;
  while (true) {
    if (archive.size() - offset < kTarBlock) fail(ExitCode::data, "{}: ends at byte {} without the tar end", name, offset);
    const char* header = archive.data() + offset;
    if (std::all_of(header, header + kTarBlock, [](char c) { return c == '\0'; })) return members;
    std::uint64_t size = 0, checksum = 0;
    if (!read_octal(header + kSize, 12, size) || !read_octal(header + kChecksum, 8, checksum) ||
        checksum != header_checksum(header)) {
      fail(ExitCode::data, "{}: no tar header at byte {} (the archive is damaged)", name, offset);
    }
    std::string member(header + kName, strnlen(header + kName, kNameLength));
    const char type = header[kType];
    const std::uint64_t next = offset + tar_member_size(size);
    if (size > archive.size() || next > archive.size()) {
      fail(ExitCode::data, "{}: member '{}' at byte {} runs past the end", name, member, offset);
    }
    if (type == '0' || type == '\0') members.push_back({std::move(member), offset + kTarBlock, size});
    offset = next;
  }
}

}  // namespace tp::data
