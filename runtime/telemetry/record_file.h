// TFRecord framing, the container of TensorBoard's event files: each record is its length (8 bytes, little
// endian), the masked CRC32C of those 8 bytes, the data, and the masked CRC32C of the data (common/crc32c.h).
// Torch-free.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace tp::telemetry {

// TFRecord's masked CRC: the CRC rotated right by 15 bits plus 0xa282ead8, so that a CRC of data that holds
// CRCs stays well distributed.
std::uint32_t masked_crc32c(std::string_view data);

// `data` framed as one record.
std::string frame_record(std::string_view data);

// The records of a TFRecord file, in order. A truncated last record (a file being written, or one a killed
// process left) ends the list; a record whose CRC does not match throws tp::Error(output) naming the file and
// the record's offset.
std::vector<std::string> read_records(const std::filesystem::path& file);

}  // namespace tp::telemetry
