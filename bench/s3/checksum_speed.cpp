// `tp_checksum_speed [MIB] [RUNS]`: GB/s of the checksums S3 transfers compute, on one core, over a buffer of
// MIB MiB (default 256) already in memory, median of RUNS (default 5): trainpoint's CRC-64/NVME (ISA-L),
// the same CRC with crcutil's tables (what trainpoint used before), CRC-32C, SHA-256 and MD5 (OpenSSL).
// Says what one byte downloaded or uploaded costs beside the transfer (docs/benchmarks.md, "On MinIO").
#include <crcutil/generic_crc.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "s3/checksums.h"

namespace {

double median_gb_per_s(const std::string& data, int runs, const std::function<void()>& compute) {
  std::vector<double> rates;
  for (int run = 0; run < runs; ++run) {
    const auto start = std::chrono::steady_clock::now();
    compute();
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
    rates.push_back(static_cast<double>(data.size()) / 1e9 / took.count());
  }
  std::sort(rates.begin(), rates.end());
  return rates[rates.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const std::size_t mib = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 256;
  const int runs = argc > 2 ? std::atoi(argv[2]) : 5;
  std::string data(mib << 20, '\0');
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 2654435761u >> 13);

  using Algorithm = tp::s3::Digest::Algorithm;
  auto digest = [&](Algorithm algorithm) {
    return [&data, algorithm] {
      tp::s3::Digest digest(algorithm);
      digest.update(data.data(), data.size());
      volatile char sink = digest.finish()[0];
      (void)sink;
    };
  };
  // crcutil's 64-bit table CRC, word at a time: the CRC-64/NVME trainpoint computed before ISA-L.
  const crcutil::GenericCrc<crcutil::uint64, crcutil::uint64, crcutil::uint64, 4> crcutil_nvme(
      0x9A6C9329AC4BC9B5ull, 64, true);
  std::printf("checksum over %zu MiB in memory, one core, median of %d: GB/s\n", mib, runs);
  std::printf("crc64nvme (ISA-L, trainpoint)   %6.2f\n", median_gb_per_s(data, runs, digest(Algorithm::crc64nvme)));
  std::printf("crc64nvme (crcutil tables)      %6.2f\n", median_gb_per_s(data, runs, [&] {
                volatile auto sink = crcutil_nvme.CrcDefault(data.data(), data.size(), 0);
                (void)sink;
              }));
  std::printf("crc32c (crc32 instruction)      %6.2f\n", median_gb_per_s(data, runs, digest(Algorithm::crc32c)));
  std::printf("sha256 (OpenSSL)                %6.2f\n", median_gb_per_s(data, runs, digest(Algorithm::sha256)));
  std::printf("md5 (OpenSSL)                   %6.2f\n", median_gb_per_s(data, runs, digest(Algorithm::md5)));
}
