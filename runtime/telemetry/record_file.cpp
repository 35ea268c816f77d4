#include "telemetry/record_file.h"

#include <cstring>
#include <fstream>
#include <iterator>

#include "common/crc32c.h"
#include "common/error.h"

namespace tp::telemetry {
namespace {

constexpr std::uint32_t kMaskDelta = 0xa282ead8u;

void put_le(std::string& out, std::uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

std::uint64_t get_le(std::string_view in, std::size_t at, int bytes) {
  std::uint64_t value = 0;
  for (int i = 0; i < bytes; ++i) value |= static_cast<std::uint64_t>(static_cast<unsigned char>(in[at + i])) << (8 * i);
  return value;
}

}  // namespace

std::uint32_t masked_crc32c(std::string_view data) {
  const std::uint32_t crc = crc32c(data);
  return ((crc >> 15) | (crc << 17)) + kMaskDelta;
}

std::string frame_record(std::string_view data) {
  std::string out;
  out.reserve(data.size() + 16);
  put_le(out, data.size(), 8);
  put_le(out, masked_crc32c(out), 4);
  out.append(data);
  put_le(out, masked_crc32c(data), 4);
  return out;
}

std::vector<std::string> read_records(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) fail(ExitCode::output, "cannot read the record file {}", file.string());
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> records;
  std::size_t at = 0;
  while (bytes.size() - at >= 12) {
    const std::string_view header(bytes.data() + at, 8);
    if (get_le(bytes, at + 8, 4) != masked_crc32c(header)) {
      fail(ExitCode::output, "{}: the length of the record at byte {} fails its CRC32C: not a TFRecord file, or "
           "a damaged one", file.string(), at);
    }
    const std::uint64_t length = get_le(bytes, at, 8);
    if (length > bytes.size() - at - 12 || bytes.size() - at - 12 - length < 4) break;  // truncated
    const std::string_view data(bytes.data() + at + 12, length);
    if (get_le(bytes, at + 12 + length, 4) != masked_crc32c(data)) {
      fail(ExitCode::output, "{}: the record at byte {} fails its CRC32C: a damaged file", file.string(), at);
    }
    records.emplace_back(data);
    at += 12 + length + 4;
  }
  return records;
}

}  // namespace tp::telemetry
