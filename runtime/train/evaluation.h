// What an epoch adds up on each rank (loss, correct predictions, absolute error, samples) and the
// validation pass that fills them in. Internal to train.
#pragma once

#include <c10/core/Device.h>

#include <cstdint>

#include "data/dataset.h"
#include "dist/communicator.h"
#include "spec/spec.h"
#include "train/precision.h"

namespace torch::jit {
struct Module;
}

namespace tp::train {

struct Totals {
  double loss_sum = 0;
  double correct = 0;
  double top_k_correct = 0;
  double absolute_error = 0;  // regression
  double count = 0;
};

// Per-rank totals summed over all ranks. Collective.
Totals summed_over_ranks(const Totals& mine, dist::Communicator& communicator);

// Whether top-k accuracy is reported: single-label classification with more than k classes.
bool reports_top_k(const data::Schema& schema, std::int64_t k);

// Validation on this rank's disjoint share (no padding, so every sample counts once overall), summed over
// all ranks. Collective.
Totals validate(torch::jit::Module& model, const data::Datasets& data, const spec::Spec& spec,
                dist::Communicator& communicator, const Precision& precision, c10::Device device);

}  // namespace tp::train
