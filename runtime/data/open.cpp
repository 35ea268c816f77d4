// Opening the data a spec names: image folders, images labelled by a CSV, and tabular CSVs.
#include "common/error.h"
#include "data/dataset.h"
#include "data/format_helpers.h"
#include "data/formats.h"

namespace tp::data {

Datasets open(const spec::DataSpec& spec, const std::filesystem::path& root, std::uint64_t seed,
              const std::shared_ptr<const FileStore>& store) {
  if (spec.source.empty()) fail(ExitCode::spec, "data.source: required");
  Datasets datasets;
  switch (spec.format) {
    case spec::DataFormat::image_folder:
    case spec::DataFormat::image_csv: datasets = open_images(spec, root, seed, store); break;
    case spec::DataFormat::table_csv: datasets = open_table(spec, root, seed); break;
  }
  const Schema& schema = datasets.schema;
  // One class trains to a loss of 0 and predicts nothing: a data mistake, not a run to wait for.
  if (schema.classification && !schema.multi_label && schema.class_names.size() == 1) {
    fail(ExitCode::data, "{}: every sample has the class '{}': classification needs two or more",
         resolve(root, spec.source).string(), schema.class_names.front());
  }
  return datasets;
}

}  // namespace tp::data
