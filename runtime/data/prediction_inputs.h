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

// Which columns of a table name a row and hold its true value (empty: none); of a CSV that lists images, which
// holds their true classes or values (empty: "label", data.target's default, where the CSV has it).
struct TableColumns {
  std::string id;     // the sample id written with each prediction; default: the file's name and line
  std::string label;  // the true class or value, for the accuracy or error of the predictions
};

struct PredictionInputs {
  // Every sample, in a fixed order (path order for images in a folder, line order for a CSV). A labelled
  // sample's target is its class index (classification), a row of 0 and 1 over the classes (multi-label) or
  // its value (regression); an unlabelled one's is -1 or NaN.
  std::shared_ptr<const Dataset> samples;
  bool labelled = false;
  std::shared_ptr<BadFiles> bad_files;  // never null
};

// Images (the schema has image_size): `source` is one image file or a folder, every image below it; when
// each image is in a subfolder named after one of the model's classes (an image_folder's validation folder),
// those are its labels. A CSV file, or a folder with one .csv file directly in it, lists images as image_csv
// does: the first column, relative to the CSV's folder (a sample's id as the CSV gives it), labelled by the
// label column where the CSV has it. A folder with an index.json is packed shards (`trainpoint pack`): every
// sample, the training shards' then the validation shards', labelled by the index. Tables (the schema has
// feature_names): `source` is a CSV file (or a folder with one) with the columns the model was trained on; a
// category not seen in training encodes as zeros, a missing number as the training median. Files are listed and
// read through `store`, tables from local disk. Throws tp::Error(data) naming the file, line and column of what
// does not fit the model: a missing column or image, a cell that is no number, a label that is not one of the
// model's classes; tp::Error(usage) for --id-column with images, --label-column with images not in a CSV.
PredictionInputs open_prediction_inputs(const std::filesystem::path& source, const Schema& schema,
                                        const TableColumns& columns, std::int64_t max_bad_files,
                                        const std::shared_ptr<const FileStore>& store = local_files());

}  // namespace tp::data
