#include "data/image_formats.h"

#include <ATen/ATen.h>

#include <algorithm>

#include "common/error.h"
#include "data/dataset.h"
#include "data/file_store.h"
#include "data/format_helpers.h"
#include "data/image.h"
#include "data/transform.h"

namespace tp::data {

namespace fs = std::filesystem;

namespace {

ImageTransform eval_transform(const spec::DataSpec& spec) {
  ImageTransform transform;
  transform.size = static_cast<int>(spec.image_size);
  transform.crop_to_square = spec.resize == "crop";
  transform.normalization = spec.normalize == "imagenet"
                                ? Normalization::imagenet(static_cast<int>(spec.channels))
                                : Normalization::unit();
  return transform;
}

ImageTransform train_transform(const spec::DataSpec& spec) {
  ImageTransform transform = eval_transform(spec);
  const auto has = [&](const char* name) {
    return std::find(spec.augment.begin(), spec.augment.end(), name) != spec.augment.end();
  };
  transform.random_resized_crop = has("random_resized_crop");
  transform.flip = has("flip");
  return transform;
}

// Image files with one target each (a class index, a float, or a multi-hot vector).
class ImageDataset final : public Dataset {
 public:
  ImageDataset(std::shared_ptr<const FileStore> store, std::vector<fs::path> files, fs::path root,
               at::Tensor targets, ImageTransform transform, int channels, std::uint64_t seed,
               std::shared_ptr<BadFiles> bad_files)
      : store_(std::move(store)),
        files_(std::move(files)),
        root_(std::move(root)),
        targets_(std::move(targets)),
        transform_(transform),
        channels_(channels),
        seed_(seed),
        bad_files_(std::move(bad_files)) {}

  std::size_t size() const override { return files_.size(); }
  std::string describe(std::size_t index) const override { return files_.at(index).string(); }
  std::string sample_name(std::size_t index) const override {
    return files_.at(index).lexically_relative(root_).generic_string();
  }

  void will_read(const std::vector<std::size_t>& indices) const override {
    std::vector<fs::path> files;
    files.reserve(indices.size());
    for (const std::size_t index : indices) files.push_back(files_.at(index));
    store_->will_read(files);
  }

  Example get(std::size_t index, std::int64_t epoch) const override {
    at::Tensor input = at::empty({channels_, transform_.size, transform_.size}, at::kFloat);
    at::Tensor target = get_into(index, epoch, input);
    return {input, target};
  }

  // A bad file is reported and the next sample takes its place, with the same random choices.
  at::Tensor get_into(std::size_t index, std::int64_t epoch, at::Tensor& input) const override {
    for (std::size_t attempt = 0; attempt < files_.size(); ++attempt) {
      const std::size_t actual = (index + attempt) % files_.size();
      try {
        load(actual, epoch, index, input.data_ptr<float>());
        return targets_[static_cast<std::int64_t>(actual)];
      } catch (const BrokenStore&) {
        throw;
      } catch (const Error& error) {
        if (error.code() != ExitCode::data) throw;
        bad_files_->report(describe(actual), error.what());
      }
    }
    fail(ExitCode::data, "no readable image among the {} files (the first is {})", files_.size(),
         describe(0));
  }

 private:
  // Writes channels x size x size floats to `out`.
  void load(std::size_t file_index, std::int64_t epoch, std::size_t sample_index, float* out) const {
    const std::string name = describe(file_index);
    const std::string bytes = store_->read(files_[file_index]);
    const ImageSize stored = read_image_size(bytes, name);
    std::mt19937_64 generator = sample_generator(seed_, epoch, sample_index);
    const Placement placement = place(transform_, stored, generator);
    // Decode no more than the crop needs (DCT-domain scaling, skipped rows and columns), into a reused
    // buffer.
    thread_local DecodedRegion decoded;
    decode_for_resample(bytes, name, channels_, placement.box, transform_.size, decoded);
    resample_normalized(decoded.image, decoded.box, transform_.size, placement.flip, transform_.normalization,
                        out);
  }

  std::shared_ptr<const FileStore> store_;
  std::vector<fs::path> files_;
  fs::path root_;
  at::Tensor targets_;
  ImageTransform transform_;
  int channels_;
  std::uint64_t seed_;
  std::shared_ptr<BadFiles> bad_files_;
};

// The training examples of each class.
std::vector<std::int64_t> class_counts(const LabelledImages& images) {
  std::vector<std::int64_t> counts(images.classes.size(), 0);
  const std::size_t width = images.target_width();
  for (std::size_t i = 0; i < images.targets.size(); ++i) {
    if (images.kind == TargetKind::multi_hot) {
      counts[i % width] += static_cast<std::int64_t>(images.targets[i]);
    } else {
      ++counts.at(static_cast<std::size_t>(images.targets[i]));
    }
  }
  return counts;
}

}  // namespace

at::Tensor target_tensor(const LabelledImages& images) {
  const at::Tensor targets = at::tensor(images.targets, at::kFloat);
  switch (images.kind) {
    case TargetKind::class_index: return targets.to(at::kLong);
    case TargetKind::number: return targets;
    case TargetKind::multi_hot:
      return targets.view({static_cast<std::int64_t>(images.files.size()),
                           static_cast<std::int64_t>(images.target_width())});
  }
  spec::unhandled(images.kind);
}

std::shared_ptr<const Dataset> image_dataset(std::shared_ptr<const FileStore> store, std::vector<fs::path> files,
                                             fs::path root, at::Tensor targets, ImageTransform transform,
                                             int channels, std::uint64_t seed, std::shared_ptr<BadFiles> bad_files) {
  return std::make_shared<ImageDataset>(std::move(store), std::move(files), std::move(root), std::move(targets),
                                        transform, channels, seed, std::move(bad_files));
}

Datasets open_images(const spec::DataSpec& spec, std::uint64_t seed,
                     const std::shared_ptr<const FileStore>& store,
                     std::pair<LabelledImages, LabelledImages> train_and_valid) {
  auto& [train, valid] = train_and_valid;
  if (spec.task != spec::Task::regression) log_classes(train.classes, class_counts(train));
  Datasets datasets;
  datasets.bad_files = std::make_shared<BadFiles>(spec.max_bad_files);
  const int channels = static_cast<int>(spec.channels);
  at::Tensor train_targets = target_tensor(train);
  at::Tensor valid_targets = target_tensor(valid);
  datasets.train = image_dataset(store, std::move(train.files), train.root, std::move(train_targets),
                                 train_transform(spec), channels, seed, datasets.bad_files);
  datasets.valid = image_dataset(store, std::move(valid.files), valid.root, std::move(valid_targets),
                                 eval_transform(spec), channels, seed, datasets.bad_files);
  Schema& schema = datasets.schema;
  schema.input_shape = {channels, spec.image_size, spec.image_size};
  schema.classification = spec.task != spec::Task::regression;
  schema.multi_label = spec.task == spec::Task::multi_label;
  schema.class_names = train.classes;
  schema.num_outputs = schema.classification ? static_cast<std::int64_t>(train.classes.size()) : 1;
  schema.resize = spec.resize;
  const Normalization normalization = eval_transform(spec).normalization;
  schema.pixel_mean.assign(normalization.mean.begin(), normalization.mean.begin() + channels);
  schema.pixel_std.assign(normalization.std.begin(), normalization.std.begin() + channels);
  return datasets;
}

}  // namespace tp::data
