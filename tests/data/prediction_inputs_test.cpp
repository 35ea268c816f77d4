// What `trainpoint predict` reads: images and table rows made into inputs by the schema a model saved, not by
// the new data's statistics; labels where the data has them; what does not fit the model named.
#include "data/prediction_inputs.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "common/error.h"
#include "data/image.h"
#include "support/temp_dir.h"

namespace tp::data {
namespace {

namespace fs = std::filesystem;
using tp::testing::TempDir;
using tp::testing::write_text;

Schema table_schema() {
  Schema schema;
  schema.classification = true;
  schema.class_names = {"no", "yes"};
  schema.num_outputs = 2;
  schema.feature_names = {"age", "age=#na#", "colour=blue", "colour=red"};
  schema.feature_mean = {40, 0.1, 0.5, 0.5};
  schema.feature_std = {10, 0.3, 0.5, 0.5};
  schema.feature_fill = {35, NAN, NAN, NAN};
  schema.input_shape = {4};
  return schema;
}

// The error opening `source` for `schema` gives, of class `code`.
std::string opening_error(const fs::path& source, const Schema& schema, const TableColumns& columns, ExitCode code) {
  try {
    open_prediction_inputs(source, schema, columns, 0);
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), code) << error.what();
    return error.what();
  }
  ADD_FAILURE() << "no error";
  return "";
}

TEST(PredictionInputs, TableRowsAreEncodedWithTheModelsStatistics) {
  TempDir dir;
  write_text(dir / "rows.csv", "name,colour,age,answer\nann,red,50,yes\nbob,green,,no\n");
  const PredictionInputs inputs = open_prediction_inputs(dir / "rows.csv", table_schema(), {"name", "answer"}, 0);
  ASSERT_EQ(inputs.samples->size(), 2u);
  EXPECT_TRUE(inputs.labelled);
  const Example ann = inputs.samples->get(0, 0);
  EXPECT_TRUE(torch::allclose(ann.input, torch::tensor({(50 - 40) / 10.f, (0 - 0.1f) / 0.3f, -1.f, 1.f})));
  EXPECT_EQ(ann.target.item<std::int64_t>(), 1);
  // A missing age is the training median (35) and flags age=#na#; an unseen colour is all zeros.
  const Example bob = inputs.samples->get(1, 0);
  EXPECT_TRUE(torch::allclose(bob.input, torch::tensor({(35 - 40) / 10.f, (1 - 0.1f) / 0.3f, -1.f, -1.f})));
  EXPECT_EQ(bob.target.item<std::int64_t>(), 0);
  EXPECT_EQ(inputs.samples->sample_name(1), "bob");
}

TEST(PredictionInputs, AnUnlabelledTableNamesRowsByFileAndLine) {
  TempDir dir;
  write_text(dir / "rows.csv", "colour,age\nred,50\nblue,20\n");
  const PredictionInputs inputs = open_prediction_inputs(dir / "rows.csv", table_schema(), {}, 0);
  EXPECT_FALSE(inputs.labelled);
  EXPECT_EQ(inputs.samples->sample_name(1), "rows.csv:3");
  EXPECT_EQ(inputs.samples->get(1, 0).target.item<std::int64_t>(), -1);
}

TEST(PredictionInputs, WhatDoesNotFitTheModelIsNamedWithItsPlace) {
  TempDir dir;
  write_text(dir / "no_age.csv", "colour\nred\n");
  EXPECT_NE(opening_error(dir / "no_age.csv", table_schema(), {}, ExitCode::data)
                .find("no_age.csv: no column 'age', which the model was trained on (its columns: colour)"),
            std::string::npos);
  write_text(dir / "words.csv", "colour,age\nred,50\nred,old\n");
  EXPECT_NE(opening_error(dir / "words.csv", table_schema(), {}, ExitCode::data)
                .find("words.csv:3: column 'age': 'old' is not a number"),
            std::string::npos);
  write_text(dir / "labels.csv", "colour,age,answer\nred,50,maybe\n");
  EXPECT_NE(opening_error(dir / "labels.csv", table_schema(), {"", "answer"}, ExitCode::data)
                .find("labels.csv:2: column 'answer': 'maybe' is not one of the model's classes (no, yes)"),
            std::string::npos);
  EXPECT_NE(opening_error(dir / "labels.csv", table_schema(), {"id", ""}, ExitCode::data)
                .find("no column 'id' (--id-column)"),
            std::string::npos);
}

Schema image_schema() {
  Schema schema;
  schema.classification = true;
  schema.class_names = {"cat", "dog"};
  schema.num_outputs = 2;
  schema.input_shape = {3, 4, 4};
  schema.resize = "stretch";
  schema.pixel_mean = {0.5, 0.5, 0.5};
  schema.pixel_std = {0.25, 0.25, 0.25};
  return schema;
}

void write_solid(const fs::path& file, std::uint8_t value) {
  fs::create_directories(file.parent_path());
  write_png(file, Image{8, 8, 3, std::vector<std::uint8_t>(8 * 8 * 3, value)});
}

TEST(PredictionInputs, ImagesInClassFoldersAreLabelledAndNormalizedAsTheModelWas) {
  TempDir dir;
  write_solid(dir / "valid" / "dog" / "d.png", 255);
  write_solid(dir / "valid" / "cat" / "c.png", 0);
  write_text(dir / "valid" / "cat" / "notes.txt", "not an image");
  const PredictionInputs inputs = open_prediction_inputs(dir / "valid", image_schema(), {}, 0);
  ASSERT_EQ(inputs.samples->size(), 2u);
  EXPECT_TRUE(inputs.labelled);
  EXPECT_EQ(inputs.samples->sample_name(0), "cat/c.png");
  const Example cat = inputs.samples->get(0, 0);
  EXPECT_EQ(cat.input.sizes(), torch::IntArrayRef({3, 4, 4}));
  EXPECT_TRUE(torch::allclose(cat.input, torch::full({3, 4, 4}, -2.f)));  // (0 - 0.5) / 0.25
  EXPECT_TRUE(torch::allclose(inputs.samples->get(1, 0).input, torch::full({3, 4, 4}, 2.f)));
  EXPECT_EQ(inputs.samples->get(1, 0).target.item<std::int64_t>(), 1);
}

TEST(PredictionInputs, ImagesOutsideClassFoldersAreUnlabelled) {
  TempDir dir;
  write_solid(dir / "new" / "dog" / "d.png", 255);
  write_solid(dir / "new" / "x.png", 0);
  const PredictionInputs inputs = open_prediction_inputs(dir / "new", image_schema(), {}, 0);
  EXPECT_FALSE(inputs.labelled);
  EXPECT_EQ(inputs.samples->size(), 2u);
  EXPECT_EQ(inputs.samples->get(0, 0).target.item<std::int64_t>(), -1);
  // One image file alone.
  const PredictionInputs one = open_prediction_inputs(dir / "new" / "x.png", image_schema(), {}, 0);
  EXPECT_EQ(one.samples->size(), 1u);
  EXPECT_EQ(one.samples->sample_name(0), "x.png");
  EXPECT_NE(opening_error(dir / "none", image_schema(), {}, ExitCode::data)
                .find("none: no such file or folder"),
            std::string::npos);
}

// The CSV that lists images as image_csv does: the first column relative to the CSV's folder, its label column.
TEST(PredictionInputs, ImagesListedInACsvAreTheSameInputsAsTheFolderAndLabelledByItsLabelColumn) {
  TempDir dir;
  write_solid(dir / "valid" / "dog" / "d.png", 255);
  write_solid(dir / "valid" / "cat" / "c.png", 0);
  write_text(dir / "valid" / "list.csv", "file,label\ndog/d.png,dog\n./cat/c.png,cat\n");
  const PredictionInputs listed = open_prediction_inputs(dir / "valid" / "list.csv", image_schema(), {}, 0);
  ASSERT_EQ(listed.samples->size(), 2u);
  EXPECT_TRUE(listed.labelled);
  EXPECT_EQ(listed.samples->sample_name(0), "dog/d.png");
  EXPECT_EQ(listed.samples->sample_name(1), "./cat/c.png") << "the path as the CSV gives it";
  EXPECT_EQ(listed.samples->get(0, 0).target.item<std::int64_t>(), 1);
  EXPECT_EQ(listed.samples->get(1, 0).target.item<std::int64_t>(), 0);
  fs::remove(dir / "valid" / "list.csv");
  const PredictionInputs folder = open_prediction_inputs(dir / "valid", image_schema(), {}, 0);
  EXPECT_TRUE(torch::equal(listed.samples->get(0, 0).input, folder.samples->get(1, 0).input));
  EXPECT_TRUE(torch::equal(listed.samples->get(1, 0).input, folder.samples->get(0, 0).input));

  // A folder with one CSV is that CSV; without its label column the images are unlabelled, and --label-column
  // names another.
  write_text(dir / "valid" / "list.csv", "file,kind\ndog/d.png,cat\n");
  const PredictionInputs unlabelled = open_prediction_inputs(dir / "valid", image_schema(), {}, 0);
  ASSERT_EQ(unlabelled.samples->size(), 1u);
  EXPECT_FALSE(unlabelled.labelled);
  EXPECT_EQ(unlabelled.samples->get(0, 0).target.item<std::int64_t>(), -1);
  const PredictionInputs kind = open_prediction_inputs(dir / "valid", image_schema(), {"", "kind"}, 0);
  EXPECT_TRUE(kind.labelled);
  EXPECT_EQ(kind.samples->get(0, 0).target.item<std::int64_t>(), 0);
}

TEST(PredictionInputs, AMultiLabelCsvGivesRowsOverTheModelsClasses) {
  TempDir dir;
  write_solid(dir / "a.png", 0);
  write_solid(dir / "b.png", 255);
  write_text(dir / "tags.csv", "image,label\na.png,dog cat\nb.png,\n");
  Schema schema = image_schema();
  schema.multi_label = true;
  const PredictionInputs inputs = open_prediction_inputs(dir / "tags.csv", schema, {}, 0);
  EXPECT_TRUE(inputs.labelled);
  EXPECT_TRUE(torch::equal(inputs.samples->get(0, 0).target, torch::tensor({1.f, 1.f})));
  EXPECT_TRUE(torch::equal(inputs.samples->get(1, 0).target, torch::tensor({0.f, 0.f})));
}

TEST(PredictionInputs, ACsvLineThatDoesNotFitIsNamedWithItsFileAndLine) {
  TempDir dir;
  write_solid(dir / "dog" / "d.png", 255);
  write_text(dir / "missing.csv", "file,label\ndog/d.png,dog\ndog/gone.png,dog\n");
  EXPECT_NE(opening_error(dir / "missing.csv", image_schema(), {}, ExitCode::data)
                .find("missing.csv:3: no image 'dog/gone.png'"),
            std::string::npos);
  write_text(dir / "cow.csv", "file,label\ndog/d.png,cow\n");
  EXPECT_NE(opening_error(dir / "cow.csv", image_schema(), {}, ExitCode::data)
                .find("cow.csv:2: column 'label': 'cow' is not among the training classes"),
            std::string::npos);
  EXPECT_NE(opening_error(dir / "cow.csv", image_schema(), {"", "truth"}, ExitCode::data)
                .find("no column 'truth' (--label-column)"),
            std::string::npos);
  // Which CSV of two lists the images is not guessed.
  EXPECT_NE(opening_error(dir.path(), image_schema(), {}, ExitCode::data)
                .find("2 CSV files (cow.csv, missing.csv, ...)"),
            std::string::npos);
  // Images in a folder are labelled by their class folder, not a column.
  EXPECT_NE(opening_error(dir / "dog", image_schema(), {"", "label"}, ExitCode::usage)
                .find("--label-column is for tables and images listed in a CSV"),
            std::string::npos);
}

}  // namespace
}  // namespace tp::data
