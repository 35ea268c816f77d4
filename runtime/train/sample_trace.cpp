#include "train/sample_trace.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>

namespace tp::train {

SampleTrace::SampleTrace(int rank) {
  const char* directory = std::getenv("TRAINPOINT_TRACE_SAMPLES");
  if (directory == nullptr || *directory == '\0') return;
  std::filesystem::create_directories(directory);
  out_.open(std::filesystem::path(directory) / fmt::format("samples-rank-{}.txt", rank), std::ios::app);
}

void SampleTrace::record(std::int64_t epoch, const std::vector<std::size_t>& indices, std::size_t batch,
                         std::size_t batch_size) {
  if (!out_.is_open()) return;
  for (std::size_t i = batch * batch_size; i < std::min(indices.size(), (batch + 1) * batch_size); ++i) {
    out_ << epoch << ' ' << indices[i] << '\n';
  }
  out_.flush();
}

}  // namespace tp::train
