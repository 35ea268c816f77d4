// Data streamed from S3 reads the same samples as a local copy within the cache's bound; s3:// outputs
// upload what is published and give a new pod what it needs to resume; model.weights may be in S3.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <fstream>
#include <numeric>

#include "common/error.h"
#include "data/loader.h"
#include "model/model.h"
#include "s3/s3_server.h"
#include "s3/stage.h"
#include "spec/spec.h"
#include "storage/data_source.h"
#include "storage/model_weights.h"
#include "storage/output.h"
#include "support/process.h"
#include "support/temp_dir.h"

namespace tp::storage {
namespace {

namespace fs = std::filesystem;
using testing::bytes_in;
using testing::S3Server;

class StorageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    setenv("AWS_ENDPOINT_URL", server_.endpoint().c_str(), 1);
    setenv("AWS_ACCESS_KEY_ID", S3Server::kAccessKey, 1);
    setenv("AWS_SECRET_ACCESS_KEY", S3Server::kSecretKey, 1);
    spec_ = spec::load_string("[data]\nsource = \"data\"\n[model]\narch = \"mlp\"\n", {}, "test.toml").spec;
  }
  void TearDown() override {
    unsetenv("AWS_ENDPOINT_URL");
    unsetenv("AWS_ACCESS_KEY_ID");
    unsetenv("AWS_SECRET_ACCESS_KEY");
  }
  void upload(const fs::path& source, const std::string& destination) {
    s3::Client client(testing::test_connection(server_.endpoint()));
    s3::upload_with(client, source, destination);
  }

  S3Server server_;
  testing::TempDir dir_;
  spec::Spec spec_;
};

// 120 PNGs of about 210 KB (25 MB) through a 16 MiB cache: every sample decodes as from a local copy.
TEST_F(StorageTest, StreamedImagesMatchALocalCopyAndTheCacheStaysWithinItsBound) {
  testing::run_checked(std::string(TP_MAKE_DATASET_BIN) + " images --out " + (dir_ / "images").string() +
                       " --classes 2 --per-class 60 --size 400 --format png --seed 2");
  upload(dir_ / "images", "s3://test-bucket/big");

  spec_.data.source = "s3://test-bucket/big";
  spec_.data.staging = spec::Staging::stream;
  spec_.data.stream_cache_mb = 16;
  spec_.data.valid = 0.25;
  spec_.data.image_size = 32;
  const Placement placement{dir_ / "work", {}, 0};
  const data::Datasets streamed = open_data(spec_.data, dir_.path(), placement, 7);
  spec::DataSpec local_spec = spec_.data;
  local_spec.source = (dir_ / "images").string();
  const data::Datasets local = data::open(local_spec, dir_.path(), 7);
  ASSERT_EQ(streamed.train->size(), 90u);
  ASSERT_EQ(streamed.valid->size(), 30u);
  EXPECT_EQ(streamed.schema.class_names, local.schema.class_names);

  const fs::path cache = dir_ / "work" / "cache" / "stream" / "rank-0";
  std::vector<std::size_t> indices(streamed.train->size());
  std::iota(indices.begin(), indices.end(), 0);
  std::reverse(indices.begin(), indices.end());
  data::Loader streamed_loader(streamed.train, indices, 1, {8, 2});
  data::Loader local_loader(local.train, indices, 1, {8, 2});
  std::uint64_t most_on_disk = 0;
  std::size_t samples = 0;
  while (auto batch = streamed_loader.next()) {
    const auto expected = local_loader.next();
    ASSERT_TRUE(expected.has_value());
    EXPECT_TRUE(torch::equal(batch->inputs, expected->inputs));
    EXPECT_TRUE(torch::equal(batch->targets, expected->targets));
    samples += static_cast<std::size_t>(batch->targets.size(0));
    most_on_disk = std::max(most_on_disk, bytes_in(cache));
  }
  EXPECT_EQ(samples, 90u);
  // The bound: the capacity, plus the objects that waiting readers force in (one per worker).
  EXPECT_LE(most_on_disk, (16u << 20) + 2 * 260'000u);
  EXPECT_GT(most_on_disk, 8u << 20) << "the cache was used";
  EXPECT_EQ(streamed.bad_files->files().size(), 0u);
}

TEST_F(StorageTest, S3OutputsUploadPublishedFilesAndANewPodFetchesWhatResumingNeeds) {
  spec_.job.output = "s3://test-bucket/runs/x";
  const OutputLocation first(spec_, dir_ / "pod-1");
  ASSERT_TRUE(first.remote());
  // This run's checkpoints in checkpoints/run-a/, another run's beside them.
  const fs::path mine = first.checkpoints_root() / "run-a";
  const fs::path other = first.checkpoints_root() / "run-b";
  for (const char* name : {"epoch-000001.ckpt", "epoch-000002.ckpt", "epoch-000003.ckpt", "identity.json"}) {
    testing::write_text(mine / name, name);
    first.publish(mine / name);
  }
  for (const char* name : {"epoch-000009.ckpt", "identity.json"}) {
    testing::write_text(other / name, name);
    first.publish(other / name);
  }
  testing::write_text(first.local_dir() / "metrics.jsonl", "{\"epoch\": 3}\n");
  first.publish(first.local_dir() / "metrics.jsonl");
  testing::write_text(first.local_dir() / "model.pt", "model");
  first.publish(first.local_dir() / "model.pt");

  OutputLocation second(spec_, dir_ / "pod-2");
  EXPECT_EQ(second.fetch_for_resume("run-a", 2), 5u);
  const fs::path fetched = second.checkpoints_root() / "run-a";
  EXPECT_FALSE(fs::exists(fetched / "epoch-000001.ckpt")) << "only the newest `keep` are needed";
  std::ifstream newest(fetched / "epoch-000003.ckpt");
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(newest), {}), "epoch-000003.ckpt");
  EXPECT_TRUE(fs::exists(fetched / "epoch-000002.ckpt"));
  EXPECT_TRUE(fs::exists(fetched / "identity.json"));
  EXPECT_TRUE(fs::exists(second.checkpoints_root() / "run-b" / "identity.json")) << "every run's identity";
  EXPECT_FALSE(fs::exists(second.checkpoints_root() / "run-b" / "epoch-000009.ckpt")) << "not another run's";
  EXPECT_TRUE(fs::exists(second.local_dir() / "metrics.jsonl"));
  EXPECT_FALSE(fs::exists(second.local_dir() / "model.pt")) << "a finished model is not needed to resume";
  EXPECT_FALSE(second.has_final_outputs()) << "model.pt without run.json: not finished";
  EXPECT_EQ(second.fetch_for_resume("run-a", 2), 0u) << "what is there is not fetched again";

  // A checkpoint pruned locally is withdrawn from S3: a third pod no longer finds it.
  second.withdraw(fetched / "epoch-000002.ckpt");
  OutputLocation third(spec_, dir_ / "pod-4");
  EXPECT_EQ(third.fetch_for_resume("run-a", 2), 5u);
  EXPECT_FALSE(fs::exists(third.checkpoints_root() / "run-a" / "epoch-000002.ckpt"));
  EXPECT_TRUE(fs::exists(third.checkpoints_root() / "run-a" / "epoch-000001.ckpt")) << "now among the newest 2";

  spec_.job.output = "out";
  OutputLocation local(spec_, dir_ / "pod-3");
  EXPECT_FALSE(local.remote());
  EXPECT_EQ(local.local_dir(), dir_ / "pod-3" / "out");
  EXPECT_EQ(local.fetch_for_resume("run-a", 2), 0u);
}

TEST_F(StorageTest, WeightsInS3AreDownloadedOnceAndLoadAsFromTheRepository) {
  // Weights saved by a first model, uploaded; a second model built with model.weights = s3://... equals it.
  spec_.model.hidden = {4};
  data::Schema schema;
  schema.input_shape = {3};
  schema.num_outputs = 2;
  torch::jit::Module trained = model::create(spec_.model, schema, dir_.path(), 1);
  trained.save((dir_ / "trained.pt").string());
  upload(dir_ / "trained.pt", "s3://test-bucket/pretrained/mlp.pt");

  spec_.model.weights = "s3://test-bucket/pretrained/mlp.pt";
  const spec::ModelSpec local = with_local_weights(spec_, dir_ / "work");
  EXPECT_EQ(fs::path(local.weights), fs::absolute(dir_ / "work/weights/test-bucket/pretrained/mlp.pt"));
  torch::jit::Module loaded = model::create(local, schema, dir_.path(), 2);  // another seed: the weights must win
  const auto input = torch::randn({5, 3});
  EXPECT_TRUE(torch::equal(loaded.forward({input}).toTensor(), trained.forward({input}).toTensor()));

  // A second call (another rank of the node, a restarted pod) finds the file and leaves it as it is.
  const auto modified = fs::last_write_time(local.weights);
  EXPECT_EQ(with_local_weights(spec_, dir_ / "work").weights, local.weights);
  EXPECT_EQ(fs::last_write_time(local.weights), modified);
}

TEST_F(StorageTest, MissingWeightsObjectIsAModelErrorNamingIt) {
  spec_.model.weights = "s3://test-bucket/pretrained/missing.pt";
  try {
    with_local_weights(spec_, dir_ / "work");
    FAIL() << "expected an error";
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), ExitCode::model);
    EXPECT_EQ(std::string(error.what()), "model.weights: s3://test-bucket/pretrained/missing.pt: no such object");
  }
  spec_.model.weights = "models/local.pt";
  EXPECT_EQ(with_local_weights(spec_, dir_ / "work").weights, "models/local.pt") << "repository paths pass";
}

}  // namespace
}  // namespace tp::storage
