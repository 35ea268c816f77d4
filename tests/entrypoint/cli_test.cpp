// `trainpoint pack`, `s3` and `make-dataset`'s words as cli::parse reads them: the request each command gets,
// the choices read by their names (spec::choice_names and those beside the requests), the usage errors that
// name the option, and the help.
#include "cli.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "common/error.h"

namespace tp::cli {
namespace {

// The message of the usage error that parsing `words` throws ("" when it throws none).
std::string usage_error(const std::vector<std::string>& words) {
  try {
    parse(words);
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), ExitCode::usage) << error.what();
    return error.what();
  }
  return "";
}

// The help that `words` ask for, checked: on stdout, starting with `usage`, listing each of `options`.
std::string help_text(const std::vector<std::string>& words, const std::string& usage,
                      const std::vector<std::string>& options) {
  const Options help = parse(words);
  EXPECT_EQ(help.command, Command::help);
  EXPECT_FALSE(help.usage_error);
  EXPECT_EQ(help.help_text.rfind(usage, 0), 0u) << help.help_text;
  for (const std::string& option : options) {
    EXPECT_NE(help.help_text.find(option), std::string::npos) << option << "\n" << help.help_text;
  }
  return help.help_text;
}

// `words` lack what their command needs: its help, on stderr as a usage error.
void expect_help_as_usage_error(const std::vector<std::string>& words, const std::string& help) {
  const Options lacking = parse(words);
  EXPECT_EQ(lacking.command, Command::help);
  EXPECT_TRUE(lacking.usage_error);
  EXPECT_EQ(lacking.help_text, help);
}

TEST(PackCommandLine, SourceAndDestinationWithTheDefaultsOfADataSection) {
  const Options options = parse({"pack", "images", "s3://bucket/shards"});
  ASSERT_EQ(options.command, Command::pack);
  const storage::PackRequest& request = options.pack;
  EXPECT_EQ(request.data.source, "images");
  EXPECT_EQ(request.destination, "s3://bucket/shards");
  EXPECT_EQ(request.data.format, spec::DataFormat::image_folder);
  EXPECT_EQ(request.data.task, spec::Task::classification);
  EXPECT_EQ(request.data.target, "label");
  EXPECT_DOUBLE_EQ(request.data.valid, 0.2);
  EXPECT_EQ(request.shard_bytes, 256ull << 20);
  EXPECT_EQ(request.seed, 42u);
  EXPECT_GE(request.workers, 1);
  EXPECT_TRUE(request.workdir.empty()) << "pack makes a temporary folder of its own";
}

TEST(PackCommandLine, EveryOptionReachesTheRequest) {
  const Options options = parse(
      {"pack", "labels.csv", "out", "--format", "image_csv", "--task", "regression", "--target", "age",
       "--valid", "0.1", "--valid-source", "valid.csv", "--shard-size-mb", "0.5", "--seed", "7", "--workers",
       "3", "--endpoint", "http://minio:9000", "--credentials", "keys", "--workdir", "/tmp/work"});
  const storage::PackRequest& request = options.pack;
  EXPECT_EQ(request.data.format, spec::DataFormat::image_csv);
  EXPECT_EQ(request.data.task, spec::Task::regression);
  EXPECT_EQ(request.data.target, "age");
  EXPECT_DOUBLE_EQ(request.data.valid, 0.1);
  EXPECT_EQ(request.data.valid_source, "valid.csv");
  EXPECT_EQ(request.shard_bytes, 512u << 10);
  EXPECT_EQ(request.seed, 7u);
  EXPECT_EQ(request.workers, 3);
  EXPECT_EQ(request.data.endpoint, "http://minio:9000");
  EXPECT_EQ(request.data.credentials, "keys");
  EXPECT_EQ(request.workdir, "/tmp/work");
}

// Choices are the spec's names (spec::choice_names); a spec's choice that pack does not take is refused as
// a word that is none.
TEST(PackCommandLine, ChoicesAreTheSpecsNamesAndOthersAreUsageErrorsListingThem) {
  EXPECT_EQ(usage_error({"pack", "a", "b", "--format", "table_csv"}),
            "--format table_csv: image_folder or image_csv");
  EXPECT_EQ(usage_error({"pack", "a", "b", "--format", "folder"}),
            "--format folder: image_folder or image_csv");
  EXPECT_EQ(usage_error({"pack", "a", "b", "--task", "multi_label"}),
            "--task multi_label: classification or regression");
}

TEST(PackCommandLine, NumbersOutOfRangeAndUnknownWordsAreUsageErrorsNamingThem) {
  EXPECT_EQ(usage_error({"pack", "a", "b", "--valid", "0.95"}), "--valid 0.95: 0 to 0.9");
  EXPECT_EQ(usage_error({"pack", "a", "b", "--shard-size-mb", "0.01"}),
            "--shard-size-mb 0.01: 0.0625 to 1000000");
  EXPECT_EQ(usage_error({"pack", "a", "b", "--workers", "0"}), "--workers 0: at least 1");
  EXPECT_NE(usage_error({"pack", "a", "b", "--log-format", "json"}).find("see trainpoint pack --help"),
            std::string::npos);
  EXPECT_NE(usage_error({"pack", "a", "b", "c"}).find("unexpected argument 'c'"), std::string::npos);
}

TEST(PackCommandLine, HelpOnStdoutAndWithoutBothPathsOnStderrAsAUsageError) {
  const std::string help =
      help_text({"pack", "--help"}, "usage: trainpoint pack SRC DEST [options]",
                {"--format", "--task", "--valid-source", "--shard-size-mb", "--workers", "--workdir"});
  EXPECT_EQ(help.find("TRAINPOINT_SET"), std::string::npos) << "pack reads no environment variables";
  expect_help_as_usage_error({"pack", "images"}, help);
}

TEST(S3CommandLine, EachVerbWithItsPathsAndOptions) {
  const Options listing = parse({"s3", "ls", "s3://bucket/prefix/", "-r"});
  ASSERT_EQ(listing.command, Command::s3);
  const s3::S3Command& ls = listing.s3_command;
  EXPECT_EQ(ls.verb, s3::Verb::ls);
  EXPECT_EQ(ls.source, "s3://bucket/prefix/");
  EXPECT_TRUE(ls.destination.empty());
  EXPECT_TRUE(ls.recursive);
  EXPECT_FALSE(ls.verbose);
  EXPECT_EQ(ls.transfer.parallelism, s3::TransferSettings().parallelism) << "unset options keep the defaults";

  const s3::S3Command cp =
      parse({"s3", "cp", "--verbose", "dir", "s3://bucket/prefix/", "--endpoint", "http://minio:9000",
             "--region", "eu-west-1", "--credentials", "keys", "--tenant", "lab", "--ca-bundle", "ca.pem",
             "--parallelism", "4", "--part-size-mib", "16"})
          .s3_command;
  EXPECT_EQ(cp.verb, s3::Verb::cp);
  EXPECT_EQ(cp.source, "dir");
  EXPECT_EQ(cp.destination, "s3://bucket/prefix/");
  EXPECT_FALSE(cp.recursive);
  EXPECT_TRUE(cp.verbose);
  EXPECT_EQ(cp.connection.endpoint, "http://minio:9000");
  EXPECT_EQ(cp.connection.region, "eu-west-1");
  EXPECT_EQ(cp.connection.credentials_file, "keys");
  EXPECT_EQ(cp.connection.tenant, "lab");
  EXPECT_EQ(cp.connection.ca_bundle, "ca.pem");
  EXPECT_EQ(cp.transfer.parallelism, 4);
  EXPECT_EQ(cp.transfer.part_size, 16u << 20);

  EXPECT_EQ(parse({"s3", "sync", "s3://bucket/data", "data", "-v"}).s3_command.verb, s3::Verb::sync);
}

TEST(S3CommandLine, ABadVerbPathOrNumberIsOneUsageErrorNamingIt) {
  EXPECT_EQ(usage_error({"s3", "mv", "a", "b"}), "s3 mv: ls, cp or sync");
  EXPECT_EQ(usage_error({"s3", "ls"}), "s3 ls takes one s3:// URL (see trainpoint s3 --help)");
  EXPECT_EQ(usage_error({"s3", "cp", "s3://b/k"}),
            "s3 cp takes SOURCE and DESTINATION (see trainpoint s3 --help)");
  EXPECT_EQ(usage_error({"s3", "sync", "a", "b", "c"}),
            "s3 sync takes SOURCE and DESTINATION (see trainpoint s3 --help)");
  EXPECT_EQ(usage_error({"s3", "cp", "a", "s3://b/k", "--parallelism", "0"}), "--parallelism 0: at least 1");
  EXPECT_NE(usage_error({"s3", "cp", "a", "s3://b/k", "--parallelism", "zero"}).find("zero"),
            std::string::npos);
  const std::string missing = usage_error({"s3", "ls", "s3://b/k", "--endpoint"});
  EXPECT_NE(missing.find("endpoint"), std::string::npos) << missing;
  EXPECT_NE(missing.find("see trainpoint s3 --help"), std::string::npos) << missing;
  EXPECT_NE(usage_error({"s3", "ls", "s3://b/k", "--log-level", "debug"}).find("log-level"),
            std::string::npos);
}

TEST(S3CommandLine, HelpOnStdoutAndWithoutAVerbOnStderrAsAUsageError) {
  const std::string help =
      help_text({"s3", "cp", "--help"}, "usage: trainpoint s3 ls s3://bucket[/prefix] [--recursive]",
                {"--recursive", "--verbose", "--endpoint URL", "--region NAME", "--credentials FILE",
                 "--tenant NAME", "--ca-bundle FILE", "--parallelism N", "--part-size-mib N"});
  EXPECT_EQ(parse({"s3", "help"}).help_text, help);
  expect_help_as_usage_error({"s3"}, help);
}

TEST(MakeDatasetCommandLine, ImagesWithTheDefaultsAndEveryOption) {
  const std::vector<std::string> words{"make-dataset", "images", "--out", "data"};
  EXPECT_EQ(parse(words).command, Command::make_dataset);
  const data::MakeDatasetRequest images = parse(words).make_dataset;
  EXPECT_EQ(std::pair(images.kind, images.out), std::pair(data::DatasetKind::images, std::string("data")));
  EXPECT_EQ(std::pair(images.classes, images.count), std::pair(3, 180)) << "60 per class";
  EXPECT_EQ(std::pair(images.width, images.height), std::pair(32, 32));
  EXPECT_EQ(images.format, data::ImageFileFormat::png);
  EXPECT_EQ(images.channels, 3);
  EXPECT_EQ(images.seed, 1u);

  const data::MakeDatasetRequest chosen =
      parse({"make-dataset", "images", "--out", "d", "--classes", "5", "--per-class", "7", "--size", "40x24",
             "--format", "mixed", "--channels", "1", "--seed", "9"})
          .make_dataset;
  EXPECT_EQ(chosen.classes, 5);
  EXPECT_EQ(chosen.count, 35);
  EXPECT_EQ(chosen.width, 40);
  EXPECT_EQ(chosen.height, 24);
  EXPECT_EQ(chosen.format, data::ImageFileFormat::mixed);
  EXPECT_EQ(chosen.channels, 1);
  EXPECT_EQ(chosen.seed, 9u);
  const Options counted =
      parse({"make-dataset", "images", "--out", "d", "--count", "10", "--per-class", "7"});
  EXPECT_EQ(counted.make_dataset.count, 10) << "--count wins over --per-class";
  EXPECT_EQ(parse({"make-dataset", "images", "--out", "d", "--format", "jpeg"}).make_dataset.format,
            data::ImageFileFormat::jpeg);
}

TEST(MakeDatasetCommandLine, ATable) {
  const data::MakeDatasetRequest table =
      parse({"make-dataset", "table", "--out", "t.csv", "--rows", "50", "--task", "regression"}).make_dataset;
  EXPECT_EQ(table.kind, data::DatasetKind::table);
  EXPECT_EQ(table.out, "t.csv");
  EXPECT_EQ(table.rows, 50);
  EXPECT_EQ(table.task, spec::Task::regression);
}

TEST(MakeDatasetCommandLine, ABadChoiceOrValueIsOneUsageErrorNamingIt) {
  EXPECT_EQ(usage_error({"make-dataset", "pictures", "--out", "d"}),
            "make-dataset pictures: images or table");
  EXPECT_EQ(usage_error({"make-dataset", "images", "--out", "d", "--format", "gif"}),
            "--format gif: png, jpeg or mixed");
  EXPECT_EQ(usage_error({"make-dataset", "table", "--out", "t.csv", "--task", "multi_label"}),
            "--task multi_label: classification or regression");
  EXPECT_EQ(usage_error({"make-dataset", "images", "--out", "d", "--size", "big"}),
            "--size: 'big' is not N or WxH");
  const std::string missing = usage_error({"make-dataset", "images", "--out"});
  EXPECT_NE(missing.find("out"), std::string::npos) << missing;
  EXPECT_NE(missing.find("see trainpoint make-dataset --help"), std::string::npos) << missing;
}

TEST(MakeDatasetCommandLine, HelpOnStdoutAndWithoutKindOrOutOnStderrAsAUsageError) {
  const std::string help =
      help_text({"make-dataset", "--help"}, "usage: trainpoint make-dataset images --out DIR",
                {"--out", "--classes", "--per-class", "--count", "--size", "--format", "--channels", "--rows",
                 "--task", "--seed"});
  expect_help_as_usage_error({"make-dataset"}, help);
  expect_help_as_usage_error({"make-dataset", "images"}, help);
  expect_help_as_usage_error({"make-dataset", "--out", "d"}, help);
}

TEST(PredictCommandLine, TheDefaultsAndEveryOption) {
  const Options plain = parse({"predict", "--model", "s3://b/model.pt", "--data", "valid", "--out", "p.jsonl"});
  ASSERT_EQ(plain.command, Command::predict);
  const storage::PredictRequest& request = plain.predict;
  EXPECT_EQ(request.model, "s3://b/model.pt");
  EXPECT_EQ(request.data, "valid");
  EXPECT_EQ(request.out, "p.jsonl");
  EXPECT_EQ(request.format, storage::PredictionFormat::jsonl) << "from --out's extension";
  EXPECT_EQ(std::pair(request.top_k, request.batch_size), std::pair(3, std::int64_t{64}));
  EXPECT_EQ(request.part_size, 1024);
  EXPECT_EQ(request.workdir, std::filesystem::current_path());

  const storage::PredictRequest chosen =
      parse({"predict", "--model", "m.pt", "--data", "t.csv", "--out", "p.jsonl", "--format", "csv", "--top-k", "1",
             "--batch-size", "8", "--workers", "0", "--id-column", "id", "--label-column", "y", "--part-size", "10",
             "--wait-for-parts", "60", "--endpoint", "http://minio:9000", "--workdir", "/tmp/w", "--log-format", "json"})
          .predict;
  EXPECT_EQ(chosen.format, storage::PredictionFormat::csv);
  EXPECT_EQ(chosen.top_k, 1);
  EXPECT_EQ(chosen.batch_size, 8);
  EXPECT_EQ(chosen.workers, 0);
  EXPECT_EQ(std::pair(chosen.id_column, chosen.label_column), std::pair(std::string("id"), std::string("y")));
  EXPECT_EQ(chosen.part_size, 10);
  EXPECT_EQ(chosen.wait_for_parts, std::chrono::seconds(60));
  EXPECT_EQ(chosen.connection.endpoint, "http://minio:9000");
  EXPECT_EQ(chosen.workdir, "/tmp/w");
}

TEST(PredictCommandLine, ABadValueIsOneUsageErrorAndMissingWordsShowTheHelp) {
  const std::vector<std::string> words{"predict", "--model", "m.pt", "--data", "d", "--out", "p.csv"};
  const auto with = [&](std::vector<std::string> more) {
    more.insert(more.begin(), words.begin(), words.end());
    return usage_error(more);
  };
  EXPECT_EQ(with({"--format", "xml"}), "--format xml: csv or jsonl");
  EXPECT_EQ(with({"--top-k", "0"}), "--top-k 0: at least 1");
  EXPECT_EQ(with({"--part-size", "0"}), "--part-size 0: at least 1");
  const std::string help = help_text({"predict", "--help"},
                                     "usage: trainpoint predict --model MODEL.pt --data DATA --out FILE [options]",
                                     {"--model MODEL", "--data DATA", "--out FILE", "--top-k K", "--id-column NAME",
                                      "--label-column NAME", "--part-size N", "--endpoint URL", "--log-format"});
  expect_help_as_usage_error({"predict", "--model", "m.pt", "--data", "d"}, help);
}

TEST(ExportCommandLine, TheModelTheFileAndThePython) {
  const Options plain = parse({"export", "--model", "model.pt", "--onnx", "model.onnx"});
  ASSERT_EQ(plain.command, Command::export_model);
  EXPECT_EQ(plain.export_model.model, "model.pt");
  EXPECT_EQ(plain.export_model.onnx, "model.onnx");
  EXPECT_EQ(plain.export_model.python, "python3");
  EXPECT_EQ(plain.export_model.opset, 17);
  const Options chosen = parse({"export", "--model", "s3://b/m.pt", "--onnx", "m.onnx", "--python", "/opt/venv/bin/python",
                                "--opset", "18", "--endpoint", "http://minio:9000"});
  EXPECT_EQ(chosen.export_model.python, "/opt/venv/bin/python");
  EXPECT_EQ(chosen.export_model.opset, 18);
  EXPECT_EQ(chosen.export_model.connection.endpoint, "http://minio:9000");
  EXPECT_EQ(usage_error({"export", "--model", "m.pt", "--onnx", "m.onnx", "--opset", "3"}), "--opset 3: 7 to 30");
  const std::string help = help_text({"export", "--help"},
                                     "usage: trainpoint export --model MODEL.pt --onnx FILE.onnx [options]",
                                     {"--model MODEL", "--onnx FILE", "--python PYTHON", "--opset N"});
  expect_help_as_usage_error({"export", "--model", "m.pt"}, help);
}

TEST(RenderJobCommandLine, PredictTakesTheOptionsOfPredictCheckedAtOnce) {
  const std::vector<std::string> base{"render-job", "--repo", "https://git.example.org/r.git", "--ref", "abc",
                                      "--spec", "train.toml"};
  const auto with = [&](std::vector<std::string> more) {
    more.insert(more.begin(), base.begin(), base.end());
    return more;
  };
  const Options options =
      parse(with({"--predict", "--model s3://m/model.pt  --data s3://d/new --out s3://p/new.jsonl --top-k 1"}));
  EXPECT_EQ(options.predict_words, (std::vector<std::string>{"--model", "s3://m/model.pt", "--data", "s3://d/new",
                                                             "--out", "s3://p/new.jsonl", "--top-k", "1"}));
  EXPECT_TRUE(parse(base).predict_words.empty());
  EXPECT_EQ(usage_error(with({"--predict", "--model m.pt --data d --out p.csv --format xml"})),
            "render-job --predict: --format xml: csv or jsonl");
  EXPECT_EQ(usage_error(with({"--predict", "--model m.pt --data d"})),
            "render-job --predict: give at least --model, --data and --out (see trainpoint predict --help)");
}

TEST(ClusterCommandLine, SubmitTakesRenderJobsWordsAndTheClusters) {
  const Options options =
      parse({"submit", "--repo", "https://git.example.org/r.git", "--ref", "abc", "--spec", "train.toml", "--workers",
             "2", "--namespace", "team-a", "--kubeconfig", "/k/config", "--context", "lab", "--dry-run=server"});
  EXPECT_EQ(options.command, Command::submit);
  EXPECT_EQ(options.k8s_overrides, (std::vector<std::string>{"k8s.namespace=\"team-a\"", "k8s.workers=2"}));
  EXPECT_EQ(options.cluster.kubeconfig, "/k/config");
  EXPECT_EQ(options.cluster.context, "lab");
  EXPECT_TRUE(options.cluster.dry_run);
  EXPECT_FALSE(parse({"submit", "--spec", "train.toml"}).cluster.dry_run);
  EXPECT_EQ(usage_error({"submit", "--spec", "t.toml", "--dry-run=client"}),
            "--dry-run=client: only --dry-run=server is there");
  EXPECT_EQ(usage_error({"submit", "--repo", "r"}).rfind("--spec is required", 0), 0u);
}

TEST(ClusterCommandLine, StatusLogsAndCancelNameTheJobAndLogsARank) {
  const Options status = parse({"status"});
  EXPECT_EQ(status.command, Command::status);
  EXPECT_EQ(status.cluster.job, "");
  const Options logs = parse({"logs", "fit-3", "--rank", "2", "-f", "--previous", "--namespace", "team-b"});
  EXPECT_EQ(logs.command, Command::logs);
  EXPECT_EQ(logs.cluster.job, "fit-3");
  EXPECT_EQ(logs.cluster.rank, 2);
  EXPECT_TRUE(logs.cluster.follow);
  EXPECT_TRUE(logs.cluster.previous);
  EXPECT_EQ(logs.cluster.name_space, "team-b");
  EXPECT_EQ(parse({"cancel", "fit-3"}).cluster.job, "fit-3");
  EXPECT_EQ(parse({"list", "--namespace", "x"}).command, Command::list_jobs);
  EXPECT_EQ(usage_error({"logs", "--rank", "-1"}), "--rank -1: a node rank is 0 or more");
  // cancel without a job: its help, as a usage error (deleting "the newest" job by default would be a trap)
  expect_help_as_usage_error({"cancel"}, help_text({"cancel", "--help"}, "usage: trainpoint cancel JOB",
                                                   {"--namespace", "--kubeconfig"}));
  help_text({"logs", "--help"}, "usage: trainpoint logs [JOB]", {"--rank", "--follow", "--previous"});
}

}  // namespace
}  // namespace tp::cli
