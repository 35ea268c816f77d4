// `trainpoint predict`: a model.pt trainpoint saved, applied to new data (docs/training.md, "Predictions").
// The inputs are made as the model was trained to read them (model::saved_schema), and the predictions go to
// one file, written in parts by the ranks of the job (storage/predictions.h).
#pragma once

#include "storage/predictions.h"

namespace tp::train {

// Predicts this rank's parts of the data (part % world_size == rank) that are not written yet; rank 0 then
// waits for the others' and writes the file. Returns 0. Throws tp::Error: model (no model trainpoint saved),
// data (data the model cannot read), output, storage, network, peer_lost (a rank's parts never came).
int predict(const storage::PredictRequest& request, int rank, int world_size);

}  // namespace tp::train
