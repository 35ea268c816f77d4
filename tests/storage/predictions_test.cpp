// The predictions file of `trainpoint predict`: its lines, and its parts, locally and in S3 (MinIO): a part is
// complete only with its tally, another run's parts are not taken, rank 0 merges in part order and names a
// rank whose parts never come.
#include "storage/predictions.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "s3/s3_server.h"
#include "support/temp_dir.h"

namespace tp::storage {
namespace {

namespace fs = std::filesystem;

// A connection to `server` as trainpoint's commands make it: its endpoint and a credentials file in `dir`.
s3::ConnectionOptions connection_to(const testing::S3Server& server, const testing::TempDir& dir) {
  testing::write_text(dir.path() / "keys", std::string("export AWS_ACCESS_KEY_ID=") + testing::S3Server::kAccessKey +
                                               "\nexport AWS_SECRET_ACCESS_KEY=" + testing::S3Server::kSecretKey + "\n");
  s3::ConnectionOptions connection;
  connection.endpoint = server.endpoint();
  connection.credentials_file = (dir.path() / "keys").string();
  return connection;
}

Prediction cat_prediction() {
  Prediction prediction;
  prediction.id = "valid/cat, \"tabby\".png";
  prediction.predicted = "cat";
  prediction.probability = 0.75;
  prediction.top = {{"cat", 0.75}, {"dog", 0.2}, {"bird", 0.05}};
  prediction.label = "dog";
  return prediction;
}

TEST(PredictionLines, CsvHasTheTopKAndTheLabelAndQuotesWhatNeedsIt) {
  const PredictionLayout layout{PredictionFormat::csv, true, 2, true};
  EXPECT_EQ(prediction_header(layout), "id,prediction,probability,class_2,probability_2,label\n");
  EXPECT_EQ(format_prediction(layout, cat_prediction()), "\"valid/cat, \"\"tabby\"\".png\",cat,0.75,dog,0.2,dog\n");
}

TEST(PredictionLines, RegressionHasTheValueOnly) {
  const PredictionLayout layout{PredictionFormat::csv, false, 1, false};
  Prediction prediction;
  prediction.id = "rows.csv:2";
  prediction.predicted = "3.25";
  EXPECT_EQ(prediction_header(layout), "id,prediction\n");
  EXPECT_EQ(format_prediction(layout, prediction), "rows.csv:2,3.25\n");
}

TEST(PredictionLines, JsonLinesOfARegressionHoldNumbers) {
  const PredictionLayout layout{PredictionFormat::jsonl, false, 1, true};
  Prediction prediction;
  prediction.id = "rows.csv:2";
  prediction.predicted = "3.25";
  prediction.label = "-1e-05";
  EXPECT_EQ(format_prediction(layout, prediction), "{\"id\":\"rows.csv:2\",\"label\":-1e-05,\"prediction\":3.25}\n");
}

TEST(PredictionLines, JsonLinesCarryTheTopKAsObjects) {
  const PredictionLayout layout{PredictionFormat::jsonl, true, 3, true};
  EXPECT_EQ(prediction_header(layout), "");
  const std::string line = format_prediction(layout, cat_prediction());
  ASSERT_EQ(line.back(), '\n');
  const auto json = nlohmann::json::parse(line);
  EXPECT_EQ(json.at("id"), "valid/cat, \"tabby\".png");
  EXPECT_EQ(json.at("prediction"), "cat");
  EXPECT_DOUBLE_EQ(json.at("probability").get<double>(), 0.75);
  ASSERT_EQ(json.at("top_k").size(), 3u);
  EXPECT_EQ(json.at("top_k")[1].at("class"), "dog");
  EXPECT_EQ(json.at("label"), "dog");
}

PredictionTally tally_of(std::int64_t samples, std::int64_t correct) {
  PredictionTally tally;
  tally.samples = tally.labelled = samples;
  tally.correct = correct;
  return tally;
}

// The same checks on a local output and on an S3 one.
void check_parts(const PredictRequest& request, const std::function<bool(const std::string&)>& output_has,
                 const std::function<std::string()>& output_text) {
  const PredictionParts parts(request, "run-a", 3);
  EXPECT_EQ(parts.written(), std::vector<bool>({false, false, false}));
  parts.write(2, "c\n", tally_of(1, 0));
  parts.write(0, "a1\na2\n", tally_of(2, 2));
  EXPECT_EQ(parts.written(), std::vector<bool>({true, false, true}));
  // Another run's parts under the same output are not this run's.
  EXPECT_EQ(PredictionParts(request, "run-b", 3).written(), std::vector<bool>({false, false, false}));

  PredictRequest impatient = request;
  impatient.wait_for_parts = std::chrono::seconds(1);
  try {
    PredictionParts(impatient, "run-a", 3).merge("header\n", 2);
    FAIL() << "merged without part 1";
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), ExitCode::peer_lost);
    EXPECT_NE(std::string(error.what()).find("1 of 3 parts were not written after 1 s; the first is part 2, which "
                                             "rank 1 of 2 writes"), std::string::npos) << error.what();
  }
  EXPECT_FALSE(output_has(request.out));

  parts.write(1, "b\n", tally_of(1, 1));
  const PredictionTally total = parts.merge("header\n", 2);
  EXPECT_EQ(total.samples, 4);
  EXPECT_EQ(total.correct, 3);
  EXPECT_EQ(output_text(), "header\na1\na2\nb\nc\n");
  // The parts are gone: a new run of the same key starts afresh.
  EXPECT_EQ(parts.written(), std::vector<bool>({false, false, false}));
}

TEST(PredictionParts, LocalPartsMergeInOrderOnceAllAreThere) {
  testing::TempDir dir;
  PredictRequest request;
  request.out = (dir.path() / "out" / "predictions.csv").string();
  request.workdir = dir.path();
  check_parts(
      request, [](const std::string& out) { return fs::exists(out); },
      [&] { return testing::read_text(request.out); });
  EXPECT_FALSE(fs::exists(request.out + ".parts")) << "the parts folder is removed with its last run";
}

TEST(PredictionParts, S3PartsMergeInOrderOnceAllAreThere) {
  testing::S3Server server;
  testing::TempDir dir;
  PredictRequest request;
  request.out = std::string("s3://") + testing::S3Server::kBucket + "/scores/predictions.csv";
  request.workdir = dir.path() / "work";
  request.connection = connection_to(server, dir);
  s3::Client client(testing::test_connection(server.endpoint()), testing::fast_retries());
  check_parts(
      request,
      [&](const std::string&) { return client.head(testing::S3Server::kBucket, "scores/predictions.csv").has_value(); },
      [&] {
        const auto object = client.head(testing::S3Server::kBucket, "scores/predictions.csv");
        client.download(testing::S3Server::kBucket, {{*object, dir.path() / "downloaded"}});
        return testing::read_text(dir.path() / "downloaded");
      });
  EXPECT_TRUE(client.list(testing::S3Server::kBucket, "scores/predictions.csv.parts/").objects.empty());
}

TEST(PredictionInputsCopy, AnS3ObjectAndAPrefixAreDownloadedKeepingTheirPaths) {
  testing::S3Server server;
  testing::TempDir dir;
  testing::write_text(dir.path() / "src" / "a" / "one.txt", "1");
  testing::write_text(dir.path() / "src" / "a" / "b" / "two.txt", "22");
  s3::Client client(testing::test_connection(server.endpoint()), testing::fast_retries());
  client.upload(testing::S3Server::kBucket, {{dir.path() / "src/a/one.txt", "data/a/one.txt"},
                                             {dir.path() / "src/a/b/two.txt", "data/a/b/two.txt"}});
  const s3::ConnectionOptions connection = connection_to(server, dir);
  const std::string bucket = std::string("s3://") + testing::S3Server::kBucket;
  const fs::path folder = local_copy(bucket + "/data/a", connection, dir.path() / "copy", ExitCode::data);
  EXPECT_EQ(testing::read_text(folder / "one.txt"), "1");
  EXPECT_EQ(testing::read_text(folder / "b" / "two.txt"), "22");
  const fs::path file = local_copy(bucket + "/data/a/b/two.txt", connection, dir.path() / "model", ExitCode::model);
  EXPECT_EQ(file.filename(), "two.txt");
  EXPECT_EQ(testing::read_text(file), "22");
  try {
    local_copy(bucket + "/data/none.pt", connection, dir.path() / "model", ExitCode::model);
    FAIL() << "copied nothing";
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), ExitCode::model) << error.what();
    EXPECT_NE(std::string(error.what()).find("data/none.pt"), std::string::npos) << error.what();
  }
}

// An s3:// --data is listed once and each object downloaded only when asked for: what a rank of `trainpoint
// predict` fetches for its own parts. Another attempt keeps the files already there.
TEST(PredictionRemoteData, ObjectsAreDownloadedOnlyWhenAskedForAndKeptByTheNextAttempt) {
  testing::S3Server server;
  testing::TempDir dir;
  for (const char* name : {"one.txt", "b/two.txt", "three.txt"}) testing::write_text(dir.path() / "src" / name, name);
  s3::Client client(testing::test_connection(server.endpoint()), testing::fast_retries());
  client.upload(testing::S3Server::kBucket, {{dir.path() / "src/one.txt", "data/a/one.txt"},
                                             {dir.path() / "src/b/two.txt", "data/a/b/two.txt"},
                                             {dir.path() / "src/three.txt", "data/a/three.txt"}});
  const s3::ConnectionOptions connection = connection_to(server, dir);
  const std::string prefix = std::string("s3://") + testing::S3Server::kBucket + "/data/a";
  const fs::path copy = dir.path() / "copy";
  const fs::path folder = copy / testing::S3Server::kBucket / "data" / "a";
  {
    const auto data = remote_data(prefix, connection, copy);
    ASSERT_NE(data, nullptr);
    EXPECT_EQ(data->path(), folder);
    EXPECT_EQ(data->files(), (std::vector<fs::path>{folder / "b/two.txt", folder / "one.txt", folder / "three.txt"}));
    EXPECT_TRUE(data->holds(folder / "b" / ".." / "one.txt"));
    EXPECT_FALSE(data->holds(folder / "four.txt"));
    EXPECT_EQ(data->size(folder / "three.txt"), 9u);
    EXPECT_FALSE(fs::exists(folder / "one.txt")) << "nothing is downloaded before it is asked for";
    data->fetch({folder / "one.txt", folder / "one.txt"});
    data->fetch({folder / "one.txt"});
    EXPECT_EQ(testing::read_text(folder / "one.txt"), "one.txt");
    EXPECT_FALSE(fs::exists(folder / "b" / "two.txt"));
    EXPECT_FALSE(fs::exists(folder / "three.txt"));
    EXPECT_EQ(data->downloaded(), 1u);
    try {
      data->fetch({folder / "four.txt"});
      ADD_FAILURE() << "fetched a file that is no object";
    } catch (const Error& error) {
      EXPECT_EQ(error.code(), ExitCode::data) << error.what();
      EXPECT_NE(std::string(error.what()).find("four.txt: not one of the objects under " + prefix), std::string::npos)
          << error.what();
    }
  }
  const auto again = remote_data(prefix, connection, copy);
  again->fetch(again->files());
  EXPECT_EQ(again->downloaded(), 2u);
  EXPECT_EQ(again->kept(), 1u);
  EXPECT_EQ(testing::read_text(folder / "b" / "two.txt"), "b/two.txt");
  // One object's URL: its file is the data; a local path is read where it is.
  const auto one = remote_data(prefix + "/three.txt", connection, dir.path() / "one");
  EXPECT_EQ(one->path(), dir.path() / "one" / testing::S3Server::kBucket / "data/a/three.txt/three.txt");
  EXPECT_EQ(remote_data("local/folder", connection, copy), nullptr);
}

}  // namespace
}  // namespace tp::storage
