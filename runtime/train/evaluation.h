// What an epoch adds up on each rank (loss, correct predictions, absolute error, samples) and the
// validation pass that fills them in. Internal to train.
#pragma once

#include <c10/core/Device.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "data/dataset.h"
#include "dist/communicator.h"
#include "spec/spec.h"
#include "train/interpretation.h"
#include "train/metrics.h"
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
  ClassCounts classes;  // validation of classification: per class (label), for F1; empty otherwise
};

// Per-rank totals summed over all ranks. Collective.
Totals summed_over_ranks(const Totals& mine, dist::Communicator& communicator);

// Whether top-k accuracy is reported: single-label classification with more than k classes.
bool reports_top_k(const data::Schema& schema, std::int64_t k);

// This rank's validation predictions, one per sample of its share, kept for interpretation.json: classified
// (single-label classification) or regressed.
struct Predictions {
  std::vector<ClassifiedSample> classified;
  std::vector<RegressedSample> regressed;
};

// Whether the final validation is interpreted (interpretation.json): single-label classification and
// regression with validation data.
bool interprets(const data::Datasets& data);

// Validation on this rank's disjoint share (no padding, so every sample counts once overall), summed over
// all ranks. Collective. With `predictions`, also each sample's prediction on this rank; for image
// classification the `report.top_losses` with the highest loss carry a thumbnail.
Totals validate(torch::jit::Module& model, const data::Datasets& data, const spec::Spec& spec,
                dist::Communicator& communicator, const Precision& precision, c10::Device device,
                Predictions* predictions = nullptr);

// Every rank's predictions gathered (one collective) and interpreted on rank 0 (train/interpretation.h);
// none on the other ranks.
std::optional<Interpretation> interpret(const Predictions& mine, const data::Schema& schema,
                                       const spec::Spec& spec, InterpretedAt at,
                                       dist::Communicator& communicator);

}  // namespace tp::train
