// Opening datasets from a spec: image folders, labelled images, tables, splits, errors and bad files.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "common/error.h"
#include "data/dataset.h"
#include "data/image.h"
#include "support/temp_dir.h"

namespace tp::data {
namespace {

namespace fs = std::filesystem;
using tp::testing::TempDir;
using tp::testing::write_text;

spec::DataSpec image_spec(const std::string& source) {
  spec::DataSpec spec{};
  spec.source = source;
  spec.format = spec::DataFormat::image_folder;
  spec.valid = 0.25;
  spec.image_size = 8;
  spec.channels = 3;
  spec.target = "label";
  spec.task = spec::Task::classification;
  spec.workers = 0;
  spec.resize = "stretch";
  spec.normalize = "none";
  spec.max_bad_files = 0;
  return spec;
}

Image solid(int width, int height, int channels, std::uint8_t value) {
  return Image{width, height, channels,
               std::vector<std::uint8_t>(static_cast<std::size_t>(width) * height * channels, value)};
}

// Two classes, "cat" as PNG (value 50) and "dog" as JPEG and upper-case PNG (value 200), 4 each.
void make_folder(const fs::path& dir) {
  fs::create_directories(dir / "cat");
  fs::create_directories(dir / "dog");
  for (int i = 0; i < 4; ++i) {
    write_png(dir / "cat" / ("c" + std::to_string(i) + ".png"), solid(12, 10, i % 2 ? 1 : 3, 50));
    if (i % 2) {
      write_jpeg(dir / "dog" / ("d" + std::to_string(i) + ".JPEG"), solid(20, 16, 3, 200), 95);
    } else {
      write_png(dir / "dog" / ("d" + std::to_string(i) + ".PNG"), solid(20, 16, 3, 200));
    }
  }
  write_text(dir / "dog" / "notes.txt", "not an image");
}

std::string open_error(const spec::DataSpec& spec, const fs::path& root) {
  try {
    open(spec, root, 1);
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), ExitCode::data) << error.what();
    return error.what();
  }
  ADD_FAILURE() << "open did not fail";
  return "";
}

TEST(ImageFolder, ClassesFilesSplitAndPixels) {
  TempDir dir;
  make_folder(dir / "images");
  const Datasets data = open(image_spec("images"), dir.path(), 7);
  EXPECT_EQ(data.schema.class_names, (std::vector<std::string>{"cat", "dog"}));
  EXPECT_EQ(data.schema.num_outputs, 2);
  EXPECT_EQ(data.schema.input_shape, (std::vector<std::int64_t>{3, 8, 8}));
  ASSERT_EQ(data.train->size(), 6u);
  ASSERT_EQ(data.valid->size(), 2u);
  for (const auto* part : {data.train.get(), data.valid.get()}) {
    for (std::size_t i = 0; i < part->size(); ++i) {
      const Example example = part->get(i, 0);
      ASSERT_EQ(example.input.sizes(), (c10::IntArrayRef{3, 8, 8}));
      const float expected = example.target.item<std::int64_t>() == 0 ? 50 / 255.f : 200 / 255.f;
      EXPECT_NEAR(example.input.mean().item<float>(), expected, 2 / 255.f) << part->describe(i);
    }
  }
}

TEST(ImageFolder, ValidSourceAndGrayscale) {
  TempDir dir;
  make_folder(dir / "train");
  make_folder(dir / "valid");
  fs::remove_all(dir / "valid" / "cat");
  auto spec = image_spec((dir / "train").string());
  spec.valid_source = "valid";
  spec.channels = 1;
  spec.normalize = "imagenet";
  const Datasets data = open(spec, dir.path(), 1);
  EXPECT_EQ(data.train->size(), 8u);
  ASSERT_EQ(data.valid->size(), 4u);
  const Example example = data.valid->get(0, 0);
  EXPECT_EQ(example.target.item<std::int64_t>(), 1);  // "dog" keeps its training index
  EXPECT_EQ(example.input.size(0), 1);
  EXPECT_NEAR(example.input.mean().item<float>(), (200 / 255.f - 0.449f) / 0.226f, 0.05);
  fs::create_directories(dir / "valid" / "bird");
  write_png(dir / "valid" / "bird" / "b.png", solid(4, 4, 3, 0));
  EXPECT_NE(open_error(spec, dir.path()).find("class 'bird' is not among the training classes"),
            std::string::npos);
}

TEST(ImageFolder, ErrorsNameThePath) {
  TempDir dir;
  EXPECT_EQ(open_error(image_spec("missing"), dir.path()),
            (dir / "missing").string() + ": no such directory");
  fs::create_directories(dir / "flat");
  write_png(dir / "flat" / "a.png", solid(4, 4, 3, 0));
  EXPECT_EQ(
      open_error(image_spec("flat"), dir.path()),
      (dir / "flat").string() + ": no class subdirectories (images must be in one subdirectory per class)");
  make_folder(dir / "images");
  fs::create_directories(dir / "images" / "empty");
  write_text(dir / "images" / "empty" / "readme.md", "x");
  EXPECT_EQ(open_error(image_spec("images"), dir.path()),
            (dir / "images" / "empty").string() + ": class 'empty' has no PNG or JPEG images");
  fs::create_directories(dir / "one" / "cat");
  write_png(dir / "one" / "cat" / "a.png", solid(4, 4, 3, 0));
  EXPECT_EQ(open_error(image_spec("one"), dir.path()),
            (dir / "one").string() + ": every sample has the class 'cat': classification needs two or more");
}

TEST(ImageFolder, BadFilesAreSkippedCountedAndLimited) {
  TempDir dir;
  make_folder(dir / "images");
  write_text(dir / "images" / "cat" / "c1.png", "\x89PNG\r\n\x1a\ntruncated");
  write_text(dir / "images" / "dog" / "d1.JPEG", "not a jpeg at all");
  auto spec = image_spec("images");
  spec.valid = 0;
  spec.max_bad_files = 2;
  const Datasets data = open(spec, dir.path(), 1);
  for (std::int64_t epoch = 0; epoch < 2; ++epoch) {
    for (std::size_t i = 0; i < data.train->size(); ++i) {
      const Example example = data.train->get(i, epoch);  // a bad file is replaced by the next sample
      EXPECT_EQ(example.input.size(0), 3);
    }
  }
  const auto bad = data.bad_files->files();
  ASSERT_EQ(bad.size(), 2u);
  EXPECT_EQ(bad[0], (dir / "images" / "cat" / "c1.png").string());
  spec.max_bad_files = 1;
  const Datasets strict = open(spec, dir.path(), 1);
  EXPECT_THROW(
      {
        for (std::size_t i = 0; i < strict.train->size(); ++i) strict.train->get(i, 0);
      },
      Error);
}

TEST(ImageCsv, SingleMultiLabelAndRegression) {
  TempDir dir;
  fs::create_directories(dir / "img");
  for (int i = 0; i < 4; ++i) write_png(dir / "img" / (std::to_string(i) + ".png"), solid(6, 6, 3, 10));
  write_text(dir / "labels.csv",
             "path,label,score\nimg/0.png,cat,1.5\nimg/1.png,dog cat,2\nimg/2.png,dog,3\nimg/3.png,cat,4\n");
  auto spec = image_spec("labels.csv");
  spec.format = spec::DataFormat::image_csv;
  spec.valid = 0;
  const Datasets single = open(spec, dir.path(), 1);
  // "dog cat" is one class name in single-label mode.
  EXPECT_EQ(single.schema.class_names, (std::vector<std::string>{"cat", "dog", "dog cat"}));
  spec.task = spec::Task::multi_label;
  const Datasets multi = open(spec, dir.path(), 1);
  EXPECT_TRUE(multi.schema.multi_label);
  EXPECT_EQ(multi.schema.class_names, (std::vector<std::string>{"cat", "dog"}));
  EXPECT_TRUE(multi.train->get(1, 0).target.equal(torch::tensor({1.f, 1.f})));
  EXPECT_TRUE(multi.train->get(2, 0).target.equal(torch::tensor({0.f, 1.f})));
  spec.task = spec::Task::regression;
  spec.target = "score";
  const Datasets regression = open(spec, dir.path(), 1);
  EXPECT_FLOAT_EQ(regression.train->get(0, 0).target.item<float>(), 1.5f);
  spec.target = "missing";
  EXPECT_EQ(open_error(spec, dir.path()),
            (dir / "labels.csv").string() + ": no target column 'missing' (data.target)");
  spec.task = spec::Task::classification;
  spec.target = "label";
  write_text(dir / "labels.csv", "path,label\nimg/0.png,cat\nimg/1.png, \nimg/2.png,dog\n");
  EXPECT_EQ(open_error(spec, dir.path()),
            (dir / "labels.csv").string() + ":3: column 'label' is empty: every row needs its class");
}

spec::DataSpec table_spec(const std::string& source) {
  auto spec = image_spec(source);
  spec.format = spec::DataFormat::table_csv;
  spec.valid = 0.2;
  return spec;
}

TEST(TableCsv, StandardizedFeaturesAndClassIndices) {
  TempDir dir;
  std::string csv = "a,label,b,colour\n";
  for (int i = 0; i < 50; ++i) {
    csv += std::to_string(i) + "," + (i % 3 == 0 ? "x" : "y") + "," + std::to_string(1000 + 10 * i) + "," +
           (i % 2 ? "red" : "blue") + "\n";
  }
  fs::create_directories(dir / "table");
  write_text(dir / "table" / "data.csv", csv);
  auto spec = table_spec("table");
  spec.categorical = {"colour"};
  const Datasets data = open(spec, dir.path(), 3);
  EXPECT_EQ(data.schema.feature_names, (std::vector<std::string>{"a", "b", "colour=blue", "colour=red"}));
  EXPECT_EQ(data.schema.input_shape, (std::vector<std::int64_t>{4}));
  EXPECT_EQ(data.schema.class_names, (std::vector<std::string>{"x", "y"}));
  ASSERT_EQ(data.train->size(), 40u);
  std::vector<torch::Tensor> rows;
  for (std::size_t i = 0; i < data.train->size(); ++i) rows.push_back(data.train->get(i, 0).input);
  const auto features = torch::stack(rows);
  EXPECT_TRUE(torch::allclose(features.mean(0), torch::zeros({4}), 1e-5, 1e-5));
  EXPECT_TRUE(torch::allclose(features.std(0, false), torch::ones({4}), 1e-4, 1e-4));
  EXPECT_NEAR(data.schema.feature_mean[1], 1000 + 10 * data.schema.feature_mean[0], 1e-6);
  EXPECT_EQ(data.train->get(0, 0).target.dtype(), torch::kLong);

  spec.task = spec::Task::regression;
  spec.target = "a";
  spec.categorical = {};
  write_text(dir / "table" / "data.csv", "a,b\n1,2\n3,x\n");
  EXPECT_EQ(open_error(spec, dir.path()),
            (dir / "table" / "data.csv").string() +
                ":3: column 'b': 'x' is not a number (list categorical columns in data.categorical)");
  spec.target = "label";
  EXPECT_EQ(open_error(spec, dir.path()),
            (dir / "table" / "data.csv").string() + ": no target column 'label' (data.target)");
  spec.target = "a";
  spec.task = spec::Task::classification;
  write_text(dir / "table" / "data.csv", "a,b\nyes,2\n,3\nno,4\n");
  EXPECT_EQ(open_error(spec, dir.path()),
            (dir / "table" / "data.csv").string() + ":3: column 'a' is empty: every row needs its class");
  write_text(dir / "table" / "data.csv", "a,b\nyes,2\nyes,3\n");
  EXPECT_EQ(
      open_error(spec, dir.path()),
      (dir / "table").string() + ": every sample has the class 'yes': classification needs two or more");
  write_text(dir / "table" / "other.csv", "a\n1\n");
  EXPECT_NE(open_error(spec, dir.path()).find("expected exactly one .csv file"), std::string::npos);
}

TEST(TableCsv, MissingNumbersAreFlaggedAndFilledWithTheTrainingMedian) {
  TempDir dir;
  // Column a misses rows 2 and 5 (empty, "NA"); b misses nothing here, but a cell in the validation file.
  std::string train = "a,b,label\n";
  for (int i = 0; i < 10; ++i) {
    const std::string a = i == 2 ? "" : i == 5 ? " NA" : std::to_string(i);
    train += a + "," + std::to_string(100 + i) + "," + (i % 2 ? "odd" : "even") + "\n";
  }
  write_text(dir / "train.csv", train);
  write_text(dir / "valid.csv", "a,b,label\nnull,,odd\n");
  auto spec = table_spec("train.csv");
  spec.valid_source = "valid.csv";
  const Datasets data = open(spec, dir.path(), 1);
  EXPECT_EQ(data.schema.feature_names, (std::vector<std::string>{"a", "a=#na#", "b"}));
  // The median of a's 8 numbers (0 1 3 4 6 7 8 9) is 5; b's is 104.5.
  ASSERT_EQ(data.schema.feature_fill.size(), 3u);
  EXPECT_DOUBLE_EQ(data.schema.feature_fill[0], 5);
  EXPECT_TRUE(std::isnan(data.schema.feature_fill[1]));
  EXPECT_DOUBLE_EQ(data.schema.feature_fill[2], 104.5);
  const auto raw = [&](const Dataset& dataset, std::size_t row) {
    const torch::Tensor input = dataset.get(row, 0).input.to(torch::kDouble);
    return input * torch::tensor(data.schema.feature_std, torch::kDouble) +
           torch::tensor(data.schema.feature_mean, torch::kDouble);
  };
  for (std::size_t row : {2u, 5u}) {
    EXPECT_TRUE(
        torch::allclose(raw(*data.train, row), torch::tensor({5.0, 1.0, 100.0 + row}, torch::kDouble)))
        << row << ": " << raw(*data.train, row);
  }
  EXPECT_TRUE(torch::allclose(raw(*data.train, 3), torch::tensor({3.0, 0.0, 103.0}, torch::kDouble)));
  EXPECT_TRUE(torch::allclose(raw(*data.valid, 0), torch::tensor({5.0, 1.0, 104.5}, torch::kDouble)))
      << raw(*data.valid, 0);
  // Other text in a numeric column is still an error.
  write_text(dir / "valid.csv", "a,b,label\n1,?,odd\n");
  EXPECT_EQ(open_error(spec, dir.path()),
            (dir / "valid.csv").string() +
                ":2: column 'b': '?' is not a number (list categorical columns in data.categorical)");
}

}  // namespace
}  // namespace tp::data
