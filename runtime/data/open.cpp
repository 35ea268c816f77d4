// Opening the data a spec names: the registry of data formats, and what open checks of every format.
#include "common/error.h"
#include "data/dataset.h"
#include "data/format_helpers.h"
#include "data/formats.h"

namespace tp::data {
namespace {

// The registry of data formats. Adding one: a value in spec::DataFormat, its name in choice_names and its
// case in reads_images (spec/spec.h); a file runtime/data/<format>.cpp in tp_data (CMakeLists.txt) with its
// FormatOpener, declared in data/formats.h; and its case here. -Werror=switch fails the build until both
// cases are there.
FormatOpener format_opener(spec::DataFormat format) {
  switch (format) {
    case spec::DataFormat::image_folder:
      return open_image_folder;
    case spec::DataFormat::image_csv:
      return open_image_csv;
    case spec::DataFormat::table_csv:
      return open_table_csv;
    case spec::DataFormat::shards:
      return open_shards;
  }
  spec::unhandled(format);
}

}  // namespace

Datasets open(const spec::DataSpec& spec, const std::filesystem::path& root, std::uint64_t seed,
              const std::shared_ptr<const FileStore>& store) {
  if (spec.source.empty()) fail(ExitCode::spec, "data.source: required");
  Datasets datasets = format_opener(spec.format)(spec, root, seed, store);
  const Schema& schema = datasets.schema;
  // One class trains to a loss of 0 and predicts nothing: a data mistake, not a run to wait for.
  if (schema.classification && !schema.multi_label && schema.class_names.size() == 1) {
    fail(ExitCode::data, "{}: every sample has the class '{}': classification needs two or more",
         resolve(root, spec.source).string(), schema.class_names.front());
  }
  return datasets;
}

}  // namespace tp::data
