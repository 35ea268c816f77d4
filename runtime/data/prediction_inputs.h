// The samples `trainpoint predict` scores, made into inputs as the model was trained to read them: by the
// schema saved in model.pt (model/model.h), not by statistics of the new data.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include "data/dataset.h"
#include "data/file_store.h"
#include "data/schema.h"

namespace tp::data {

// Which columns of a table name a row and hold its true value (empty: none).
struct TableColumns {
  std::string id;     // the sample id written with each prediction; default: the file's name and line
  std::string label;  // the true class or value, for the accuracy or error of the predictions
};

struct PredictionInputs {
  // Every sample, in a fixed order (path order for images, file order for tables). A labelled sample's target
  // is its class index (classification) or value (regression); an unlabelled one's is -1 or NaN.
  std::shared_ptr<const Dataset> samples;
  bool labelled = false;
  std::shared_ptr<BadFiles> bad_files;  // never null
};

// Images (the schema has image_size): `source` is one image file or a folder, every image below it; when
// each image is in a subfolder named after one of the model's classes (an image_folder's validation folder),
// those are its labels. A folder with an index.json is packed shards (`trainpoint pack`): every sample, the
// training shards' then the validation shards', labelled by the index. Tables (the schema has feature_names): `source` is a CSV file (or a folder with one)
// with the columns the model was trained on; a category not seen in training encodes as zeros, a missing
// number as the training median. Throws tp::Error(data) naming the file, line and column of what does not fit
// the model: a missing column, a cell that is no number, a label that is not one of the model's classes.
PredictionInputs open_prediction_inputs(const std::filesystem::path& source, const Schema& schema,
                                        const TableColumns& columns, std::int64_t max_bad_files,
                                        const std::shared_ptr<const FileStore>& store = local_files());

}  // namespace tp::data
