// TRAINPOINT_TRACE_SAMPLES=DIR: each rank appends "<epoch> <sample>" for every sample it trains to
// DIR/samples-rank-<rank>.txt, to show which samples a run and its restarts trained (docs/distributed.md).
// Internal to train.
#pragma once

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <vector>

namespace tp::train {

class SampleTrace {
 public:
  // Records nothing unless TRAINPOINT_TRACE_SAMPLES is set.
  explicit SampleTrace(int rank);
  // The samples of batch `batch` of `indices`.
  void record(std::int64_t epoch, const std::vector<std::size_t>& indices, std::size_t batch, std::size_t batch_size);

 private:
  std::ofstream out_;
};

}  // namespace tp::train
