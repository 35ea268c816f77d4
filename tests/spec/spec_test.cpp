#include "spec/spec.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>

#include "common/error.h"
#include "support/process.h"
#include "support/temp_dir.h"

namespace tp::spec {
namespace {

const char* kMinimal = R"(
[data]
source = "data"

[model]
arch = "small_cnn"
)";

// Loads `document` and returns the error message; fails the test if loading succeeds.
std::string load_error(const std::string& document, const std::vector<std::string>& overrides = {}) {
  try {
    load_string(document, overrides, "train.toml");
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), ExitCode::spec) << error.what();
    return error.what();
  }
  ADD_FAILURE() << "expected an error for:\n" << document;
  return "";
}

TEST(Spec, DefaultsApplyWhereTheFileIsSilent) {
  const auto loaded = load_string(kMinimal, {}, "train.toml");
  EXPECT_EQ(loaded.spec.data.source, "data");
  EXPECT_EQ(loaded.spec.model.arch, "small_cnn");
  EXPECT_EQ(loaded.spec.train.epochs, 5);
  EXPECT_DOUBLE_EQ(loaded.spec.train.lr, 1e-3);
  EXPECT_EQ(loaded.origins.at("train.lr"), "default");
  EXPECT_EQ(loaded.origins.at("data.source"), "train.toml:3:1");
}

TEST(Spec, PrecedenceIsDefaultsThenFileThenOverrides) {
  const std::string document = std::string(kMinimal) + "\n[train]\nlr = 0.05\nepochs = 3\n";
  const auto loaded = load_string(document, {"train.lr=0.2", "job.name=override-name"}, "train.toml");
  EXPECT_DOUBLE_EQ(loaded.spec.train.lr, 0.2);
  EXPECT_EQ(loaded.origins.at("train.lr"), "--set");
  EXPECT_EQ(loaded.spec.train.epochs, 3);
  EXPECT_EQ(loaded.origins.at("train.epochs"), "train.toml:10:1");
  EXPECT_EQ(loaded.spec.job.name, "override-name");
  EXPECT_EQ(loaded.spec.train.batch_size, 64);
  EXPECT_EQ(loaded.origins.at("train.batch_size"), "default");
}

TEST(Spec, LaterOverrideWins) {
  const auto loaded = load_string(kMinimal, {"train.epochs=2", "train.epochs=7"}, "train.toml");
  EXPECT_EQ(loaded.spec.train.epochs, 7);
}

TEST(Spec, OverrideAcceptsBareWordsForStrings) {
  const auto loaded = load_string(kMinimal, {"train.optimizer=sgd", "dist.nproc_per_node=auto"}, "train.toml");
  EXPECT_EQ(loaded.spec.train.optimizer, Optimizer::sgd);
  EXPECT_EQ(loaded.spec.dist.nproc_per_node, 0);
}

TEST(Spec, ChannelsLastTakesABooleanOrAuto) {
  EXPECT_EQ(load_string(kMinimal, {}, "train.toml").spec.train.channels_last, "auto");
  const auto forced = load_string(std::string(kMinimal) + "\n[train]\nchannels_last = true\n", {}, "train.toml");
  EXPECT_EQ(forced.spec.train.channels_last, "true");
  EXPECT_EQ(load_string(kMinimal, {"train.channels_last=false"}, "train.toml").spec.train.channels_last, "false");
  EXPECT_EQ(load_string(kMinimal, {"train.channels_last=auto"}, "train.toml").spec.train.channels_last, "auto");
  EXPECT_EQ(load_error(std::string(kMinimal) + "\n[train]\nchannels_last = 1\n"),
            "train.toml:9:17: train.channels_last: expected boolean or string, got an integer");
  EXPECT_EQ(load_error(std::string(kMinimal) + "\n[train]\nchannels_last = \"yes\"\n"),
            "train.toml:9:17: train.channels_last: 'yes' is not one of: auto, true, false");
  // The resolved description loads again.
  EXPECT_EQ(load_string(describe(forced), {}, "described.toml").spec.train.channels_last, "true");
}

TEST(Spec, MisspelledSectionSuggestsTheNearestKey) {
  const std::string message = load_error(std::string(kMinimal) + "\n[trian]\nlr = 0.1\n");
  EXPECT_EQ(message, "train.toml:9:1: unknown key 'trian.lr' (did you mean 'train.lr'?)");
}

TEST(Spec, MisspelledKeySuggestsTheNearestKey) {
  const std::string message = load_error(std::string(kMinimal) + "\n[train]\nepohcs = 3\n");
  EXPECT_EQ(message, "train.toml:9:1: unknown key 'train.epohcs' (did you mean 'train.epochs'?)");
}

TEST(Spec, OtherToolsNamesAndNamesWithoutTheirSectionSuggestTheSetting) {
  EXPECT_EQ(load_error(std::string(kMinimal) + "\n[train]\nlearning_rate = 0.1\n"),
            "train.toml:9:1: unknown key 'train.learning_rate' (did you mean 'train.lr'?)");
  EXPECT_EQ(load_error(kMinimal, {"epochs=3"}), "--set epochs=3: unknown key 'epochs' (did you mean 'train.epochs'?)");
  EXPECT_EQ(load_error(kMinimal, {"data.num_epochs=3"}),
            "--set data.num_epochs=3: unknown key 'data.num_epochs' (did you mean 'train.epochs'?)");
  EXPECT_EQ(load_error(kMinimal, {"Batch-Size=3"}),
            "--set Batch-Size=3: unknown key 'Batch-Size' (did you mean 'train.batch_size'?)");
  EXPECT_EQ(load_error(kMinimal, {"workers=3"}),
            "--set workers=3: unknown key 'workers' (did you mean 'data.workers' or 'k8s.workers'?)");
  EXPECT_EQ(load_error(kMinimal, {"k8s.num_workers=3"}),
            "--set k8s.num_workers=3: unknown key 'k8s.num_workers' (did you mean 'k8s.workers'?)");
}

TEST(Spec, EveryErrorOfAFileAndItsOverridesIsReportedAtOnce) {
  const std::string message = load_error(
      "[data]\nsource = \"data\"\nimage_size = 2\n[model]\narch = \"small_cnn\"\n[train]\nlearning_rate = 0.1\n"
      "epochs = \"five\"\n",
      {"train.momentum=2"});
  EXPECT_EQ(message,
            "train.toml:3:14: data.image_size: 2 is out of range: must be >= 4 and <= 4096\n"
            "train.toml:7:1: unknown key 'train.learning_rate' (did you mean 'train.lr'?)\n"
            "train.toml:8:10: train.epochs: expected integer, got a string\n"
            "--set train.momentum=2: train.momentum: 2 is out of range: must be >= 0 and <= 0.999");
  // How settings go together is checked once each setting could be read, and every mistake is named.
  EXPECT_EQ(load_error("[data]\nsource = \"data\"\nchannels = 2\n[model]\n[train]\nepochs = 2\nfreeze_epochs = 3\n"),
            "train.toml: [model] needs 'model.arch' (a built-in architecture) or 'model.torchscript'\n"
            "train.toml:3:1: data.channels: 2 is not one of: 1 (grayscale), 3 (RGB)\n"
            "train.toml:7:1: train.freeze_epochs (3) is more than train.epochs (train.toml:6:1: 2)");
}

TEST(Spec, UnknownKeyFarFromAnyGetsNoSuggestion) {
  const std::string message = load_error(std::string(kMinimal) + "\n[train]\ncompletely_unrelated_setting = 3\n");
  EXPECT_EQ(message, "train.toml:9:1: unknown key 'train.completely_unrelated_setting'");
}

TEST(Spec, WrongTypeNamesExpectedAndActual) {
  const std::string message = load_error(std::string(kMinimal) + "\n[train]\nepochs = \"five\"\n");
  EXPECT_EQ(message, "train.toml:9:10: train.epochs: expected integer, got a string");
}

TEST(Spec, FractionalNumberIsNotAnInteger) {
  EXPECT_NE(load_error(std::string(kMinimal) + "\n[train]\nbatch_size = 1.5\n").find("expected integer, got a number"),
            std::string::npos);
}

TEST(Spec, IntegerIsAcceptedForANumber) {
  const auto loaded = load_string(std::string(kMinimal) + "\n[train]\nlr = 1\n", {}, "train.toml");
  EXPECT_DOUBLE_EQ(loaded.spec.train.lr, 1.0);
}

TEST(Spec, NegativeLearningRateIsOutOfRange) {
  const std::string message = load_error(std::string(kMinimal) + "\n[train]\nlr = -0.1\n");
  EXPECT_EQ(message, "train.toml:9:6: train.lr: -0.1 is out of range: must be > 0 and <= 10");
}

TEST(Spec, ZeroLearningRateIsOutOfRange) {
  EXPECT_NE(load_error(std::string(kMinimal) + "\n[train]\nlr = 0.0\n").find("out of range"), std::string::npos);
}

// A choice is read by the names choice_names gives it, the spec's own, wherever it is read.
TEST(Spec, AChoiceIsReadByItsSpecNameAndOtherWordsAreNone) {
  EXPECT_EQ(parse_choice<Task>("regression"), Task::regression);
  EXPECT_EQ(parse_choice<DataFormat>("image_csv"), DataFormat::image_csv);
  EXPECT_EQ(parse_choice<Backend>("auto"), Backend::automatic);
  for (const Optimizer optimizer : {Optimizer::sgd, Optimizer::adam, Optimizer::adamw}) {
    EXPECT_EQ(parse_choice<Optimizer>(name(optimizer)), optimizer);
  }
  EXPECT_FALSE(parse_choice<Task>("Regression"));
  EXPECT_FALSE(parse_choice<Backend>("automatic"));
  EXPECT_FALSE(parse_choice<DataFormat>(""));
}

TEST(Spec, UnknownChoiceListsTheAllowedOnes) {
  const std::string message = load_error(std::string(kMinimal) + "\n[train]\noptimizer = \"adamax\"\n");
  EXPECT_EQ(message, "train.toml:9:13: train.optimizer: 'adamax' is not one of: sgd, adam, adamw");
}

TEST(Spec, EarlyStoppingIsATableInsideTrainAndKeepBestAMetric) {
  const auto defaults = load_string(kMinimal, {}, "train.toml").spec;
  EXPECT_EQ(defaults.train.early_stop.patience, 0) << "off unless asked for";
  EXPECT_EQ(defaults.train.early_stop.monitor, "valid_loss");
  EXPECT_EQ(defaults.checkpoint.keep_best, "none");
  const std::string document = std::string(kMinimal) +
                               "\n[train]\nepochs = 30\n\n[train.early_stop]\npatience = 3\nmonitor = \"accuracy\"\n"
                               "min_delta = 0.001\n\n[checkpoint]\nkeep_best = \"valid_loss\"\nevery_steps = 50\n";
  const auto loaded = load_string(document, {"train.early_stop.mode=max"}, "train.toml");
  EXPECT_EQ(loaded.spec.train.epochs, 30);
  EXPECT_EQ(loaded.spec.train.early_stop.patience, 3);
  EXPECT_EQ(loaded.spec.train.early_stop.monitor, "accuracy");
  EXPECT_EQ(loaded.spec.train.early_stop.mode, MetricMode::max);
  EXPECT_DOUBLE_EQ(loaded.spec.train.early_stop.min_delta, 0.001);
  EXPECT_EQ(loaded.spec.checkpoint.keep_best, "valid_loss");
  EXPECT_EQ(loaded.spec.checkpoint.every_steps, 50);
  EXPECT_EQ(loaded.origins.at("train.early_stop.patience"), "train.toml:12:1");
  EXPECT_EQ(loaded.origins.at("train.early_stop.mode"), "--set");
  // The F1 over the classes, or of one class by its name (checked against the data's classes when it is read).
  EXPECT_EQ(load_string(kMinimal, {"train.early_stop.monitor=f1"}, "t").spec.train.early_stop.monitor, "f1");
  EXPECT_EQ(load_string(kMinimal, {"checkpoint.keep_best=f1:tabby cat"}, "t").spec.checkpoint.keep_best,
            "f1:tabby cat");
  // The resolved spec, as `trainpoint check` prints it, reads back the same.
  const auto again = load_string(describe(loaded), {}, "described.toml").spec;
  EXPECT_EQ(again.train.early_stop.patience, 3);
  EXPECT_EQ(again.train.early_stop.mode, MetricMode::max);
}

TEST(Spec, EarlyStoppingsMistakesNameTheKeyAndWhere) {
  EXPECT_EQ(load_error(std::string(kMinimal) + "\n[train.early_stop]\npatience = 3\npatients = 2\n"),
            "train.toml:10:1: unknown key 'train.early_stop.patients' (did you mean 'train.early_stop.patience'?)");
  EXPECT_EQ(load_error(std::string(kMinimal) + "\n[train.early_stop]\nmonitor = \"f1:\"\n"),
            "train.toml:9:11: train.early_stop.monitor: 'f1:' is not one of: valid_loss, accuracy, error_rate, "
            "top_k_accuracy, f1, f1:<class>, mae, mse, train_loss");
  EXPECT_EQ(load_error(std::string(kMinimal) + "\n[train.early_stop]\npatience = 2\nmonitor = \"mae\"\n"),
            "train.toml:10:1: train.early_stop.monitor: a classification run does not report mae (data.task, "
            "default): use valid_loss, accuracy, error_rate or f1");
  EXPECT_NE(load_error(kMinimal, {"checkpoint.keep_best=f1:cat", "data.task=regression"})
                .find("--set: checkpoint.keep_best: a regression run does not report f1:cat"),
            std::string::npos);
  EXPECT_NE(load_error(kMinimal, {"checkpoint.keep_best=accuracy", "data.task=regression"})
                .find("--set: checkpoint.keep_best: a regression run does not report accuracy"),
            std::string::npos);
}

TEST(Spec, MissingRequiredKey) {
  const std::string message = load_error("[model]\narch = \"mlp\"\n");
  EXPECT_NE(message.find("train.toml: missing required key 'data.source'"), std::string::npos) << message;
}

TEST(Spec, ConflictingKeysNameBothPlaces) {
  const std::string message = load_error(std::string(kMinimal) + "torchscript = \"net.pt\"\n");
  EXPECT_EQ(message, "train.toml:7:1: model.torchscript conflicts with model.arch (train.toml:6:1): set only one of them");
}

TEST(Spec, ValidFractionConflictsWithValidSource) {
  const std::string message = load_error(std::string(kMinimal) + "\n[data]\n");  // duplicate table: TOML error
  EXPECT_NE(message.find("invalid TOML"), std::string::npos);
  const std::string conflict = load_error("[data]\nsource = \"a\"\nvalid = 0.1\nvalid_source = \"b\"\n[model]\narch = \"mlp\"\n");
  EXPECT_NE(conflict.find("data.valid conflicts with data.valid_source"), std::string::npos) << conflict;
}

TEST(Spec, NesterovNeedsSgdWithMomentum) {
  const std::string document = std::string(kMinimal) + "[train]\nnesterov = true\n";
  EXPECT_EQ(load_error(document), "train.toml:8:1: train.nesterov = true needs train.optimizer = \"sgd\" (default: "
                                  "\"adamw\") and train.momentum > 0 (default: 0.9)");
  EXPECT_NE(load_error(document, {"train.optimizer=sgd", "train.momentum=0"}).find("(--set: 0)"), std::string::npos);
  EXPECT_TRUE(load_string(document, {"train.optimizer=sgd"}, "train.toml").spec.train.nesterov);
}

TEST(Spec, FreezeEpochsAreSomeOfTheEpochs) {
  const std::string document = std::string(kMinimal) + "[train]\nepochs = 3\nfreeze_epochs = 4\n";
  EXPECT_EQ(load_error(document), "train.toml:9:1: train.freeze_epochs (4) is more than train.epochs (train.toml:8:1: 3)");
}

TEST(Spec, ModelNeedsArchOrTorchscript) {
  EXPECT_NE(load_error("[data]\nsource = \"a\"\n").find("needs 'model.arch'"), std::string::npos);
}

TEST(Spec, SyntaxErrorHasLineAndColumn) {
  const std::string message = load_error("[data]\nsource = \"a\n");
  EXPECT_EQ(message.rfind("train.toml:2:", 0), 0u) << message;
  EXPECT_NE(message.find("invalid TOML"), std::string::npos);
}

TEST(Spec, NonUtf8IsRejectedWithPosition) {
  const std::string message = load_error("[job]\nname = \"caf\xe9\"\n");
  EXPECT_EQ(message.rfind("train.toml:2:", 0), 0u) << message;
}

TEST(Spec, OverrideOfUnknownKeySuggests) {
  const std::string message = load_error(kMinimal, {"trian.lr=0.1"});
  EXPECT_EQ(message, "--set trian.lr=0.1: unknown key 'trian.lr' (did you mean 'train.lr'?)");
}

TEST(Spec, OverrideWithBadValue) {
  EXPECT_NE(load_error(kMinimal, {"train.lr=fast"}).find("'fast' is not a valid number"), std::string::npos);
  EXPECT_NE(load_error(kMinimal, {"train.lr"}).find("expected KEY=VALUE"), std::string::npos);
  EXPECT_NE(load_error(kMinimal, {"train.lr=-1"}).find("out of range"), std::string::npos);
}

TEST(Spec, UnreadableAndMissingFiles) {
  testing::TempDir dir;
  try {
    load_file(dir / "absent.toml", {}, "absent.toml");
    FAIL() << "expected an error";
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), ExitCode::spec);
    EXPECT_STREQ(error.what(), "absent.toml: spec file not found");
  }
  try {
    load_file(dir.path(), {}, "somedir");
    FAIL() << "expected an error";
  } catch (const Error& error) {
    EXPECT_STREQ(error.what(), "somedir: is a directory, not a TOML spec");
  }
}

TEST(Spec, DescribeNamesEveryOrigin) {
  const auto loaded = load_string(std::string(kMinimal) + "\n[train]\nlr = 0.05\n", {"train.epochs=9"}, "train.toml");
  const std::string text = describe(loaded);
  EXPECT_NE(text.find("lr = 0.05"), std::string::npos) << text;
  EXPECT_NE(text.find("# train.toml:9:1"), std::string::npos) << text;
  EXPECT_NE(text.find("epochs = 9"), std::string::npos);
  EXPECT_NE(text.find("# --set"), std::string::npos);
  EXPECT_NE(text.find("nproc_per_node = \"auto\""), std::string::npos);
  // The description is itself a valid spec that loads to the same values.
  const auto again = load_string(text, {}, "described.toml");
  EXPECT_DOUBLE_EQ(again.spec.train.lr, 0.05);
  EXPECT_EQ(again.spec.train.epochs, 9);
}

// Found by tests/fuzz (spec): strings holding control characters were described unescaped, and a spec
// with data.valid_source was described with data.valid too; neither description loaded again.
TEST(Spec, DescriptionOfControlCharactersLoadsAgain) {
  const auto loaded = load_string(std::string(kMinimal) + "[job]\nname = \"a\\nb\\tc\\u0001d\\u007F\"\n", {}, "train.toml");
  const std::string text = describe(loaded);
  EXPECT_NE(text.find(R"(name = "a\nb\tc\u0001d\u007F")"), std::string::npos) << text;
  EXPECT_EQ(load_string(text, {}, "described.toml").spec.job.name, std::string("a\nb\tc\x01") + "d\x7f");
}

TEST(Spec, DescriptionWithValidSourceLoadsAgain) {
  const auto loaded = load_string("[data]\nsource = \"a\"\nvalid_source = \"b\"\n[model]\narch = \"mlp\"\n", {}, "t.toml");
  const std::string text = describe(loaded);
  EXPECT_NE(text.find("# valid is ignored: data.valid_source is set"), std::string::npos) << text;
  EXPECT_EQ(load_string(text, {}, "described.toml").spec.data.valid_source, "b");
}

// Found by tests/fuzz (spec): a bare word given with --set was taken even when not UTF-8, and so was a
// job.env entry's value (its description then did not load).
TEST(Spec, OverrideBareWordMustBeUtf8) {
  EXPECT_EQ(load_error(kMinimal, {"job.env.GREETING=caf\xe9"}),
            "--set job.env.GREETING=...: job.env.GREETING: the value is not valid UTF-8");
  EXPECT_EQ(load_string(kMinimal, {"job.command=[\"true\"]", "job.env.GREETING=café"}, "train.toml")
                .spec.job.env.at("GREETING"),
            "café");
  EXPECT_EQ(load_error(kMinimal, {"job.name=caf\xe9"}), "--set job.name=caf\xe9: job.name: the value is not valid UTF-8");
  EXPECT_EQ(load_error(kMinimal, {"job.name=\xed\xa0\x80"}).find("not valid UTF-8") != std::string::npos, true);
  EXPECT_EQ(load_string(kMinimal, {"job.name=café"}, "train.toml").spec.job.name, "café");
}

// Found by tests/spec/bad_specs: channels = 2 passed the range check (1..3), and image decoding then
// wrote 3 bytes per pixel into a 2-byte-per-pixel buffer.
TEST(Spec, TwoChannelsAreRejected) {
  EXPECT_EQ(load_error(kMinimal, {"data.channels=2"}), "--set: data.channels: 2 is not one of: 1 (grayscale), 3 (RGB)");
  EXPECT_EQ(load_string(kMinimal, {"data.channels=1"}, "train.toml").spec.data.channels, 1);
}

TEST(Spec, ASectionThatIsNotATableIsNamed) {
  EXPECT_EQ(load_error("train = 5\n" + std::string(kMinimal)), "train.toml:1:1: train: expected a table ([train]), got a value");
}

const char* kCommandMode = R"([job]
command = ["python3", "train.py"]
requirements = "requirements.txt"

[job.env]
NCCL_DEBUG = "INFO"
OMP_NUM_THREADS = 4
)";

TEST(Spec, CommandModeTakesRequirementsAndAnEnvironmentTable) {
  const auto loaded = load_string(kCommandMode, {"job.env.MY_FLAG=on", "job.env.NCCL_DEBUG=WARN"}, "train.toml");
  EXPECT_EQ(loaded.spec.job.requirements, "requirements.txt");
  const std::map<std::string, std::string> expected{{"MY_FLAG", "on"}, {"NCCL_DEBUG", "WARN"}, {"OMP_NUM_THREADS", "4"}};
  EXPECT_EQ(loaded.spec.job.env, expected);
  EXPECT_EQ(loaded.origins.at("job.env"), "--set");
  // An inline table with --set replaces the table; the description loads again to the same values.
  const auto inline_table = load_string(kCommandMode, {"job.env={ A = \"1\" }"}, "train.toml");
  EXPECT_EQ(inline_table.spec.job.env, (std::map<std::string, std::string>{{"A", "1"}}));
  const std::string text = describe(loaded);
  EXPECT_NE(text.find(R"(env = { MY_FLAG = "on", NCCL_DEBUG = "WARN", OMP_NUM_THREADS = "4" })"), std::string::npos)
      << text;
  EXPECT_EQ(load_string(text, {}, "described.toml").spec.job.env, expected);
}

TEST(Spec, EnvironmentNamesAreCheckedWhereTheyAreWritten) {
  EXPECT_EQ(load_error(std::string(kCommandMode) + "RANK = \"3\"\n"),
            "train.toml:8:8: job.env: RANK is set by trainpoint for the program (docs/spec.md, job.command) and "
            "cannot be changed here");
  EXPECT_EQ(load_error(std::string(kCommandMode) + "DEBUG = true\n"),
            "train.toml:8:9: job.env.DEBUG: expected a string, got a boolean");
  EXPECT_EQ(load_error(kCommandMode, {"job.env.TRAINPOINT_OUTPUT_DIR=/tmp"}),
            "--set job.env.TRAINPOINT_OUTPUT_DIR=/tmp: job.env: TRAINPOINT_OUTPUT_DIR is set by trainpoint for the "
            "program (docs/spec.md, job.command) and cannot be changed here");
  EXPECT_EQ(load_error(kCommandMode, {"job.env.2FAST=1"}),
            "--set job.env.2FAST=1: job.env: '2FAST' is not an environment variable name (letters, digits and '_', "
            "not starting with a digit)");
}

// The platform team's file: the layer between the built-in defaults and the spec, [k8s] alone.
const char* kPlatform = R"([k8s]
image = "registry.example.org/trainpoint:1.0"
queue = "team-a-queue"
tolerations = ["nvidia.com/gpu:NoSchedule"]

[k8s.node_selector]
"nvidia.com/gpu.product" = "NVIDIA-H100-80GB-HBM3"
)";

TEST(Spec, PlatformDefaultsSitBetweenTheBuiltInDefaultsAndTheSpec) {
  const PlatformDefaults platform{kPlatform, "/etc/trainpoint/platform.toml"};
  const auto loaded = load_string(std::string(kMinimal) + "[k8s]\nqueue = \"urgent\"\n", {"k8s.workers=2"},
                                  "train.toml", platform);
  EXPECT_EQ(loaded.spec.k8s.image, "registry.example.org/trainpoint:1.0");
  EXPECT_EQ(loaded.origins.at("k8s.image"), "/etc/trainpoint/platform.toml:2:1");
  EXPECT_EQ(loaded.spec.k8s.queue, "urgent") << "the spec's own value wins";
  EXPECT_EQ(loaded.origins.at("k8s.queue"), "train.toml:8:1");
  EXPECT_EQ(loaded.spec.k8s.tolerations, std::vector<std::string>{"nvidia.com/gpu:NoSchedule"});
  EXPECT_EQ(loaded.spec.k8s.node_selector.at("nvidia.com/gpu.product"), "NVIDIA-H100-80GB-HBM3");
  EXPECT_EQ(loaded.spec.k8s.workers, 2);
  // The description quotes a label key, which TOML cannot take bare, and loads again to the same table.
  const std::string text = describe(loaded);
  EXPECT_NE(text.find(R"(node_selector = { "nvidia.com/gpu.product" = "NVIDIA-H100-80GB-HBM3" })"), std::string::npos)
      << text;
  EXPECT_EQ(load_string(text, {}, "described.toml").spec.k8s.node_selector, loaded.spec.k8s.node_selector);
  // A --set reaches one label.
  EXPECT_EQ(load_string(kMinimal, {"k8s.node_selector.cloud.example.com/pool=gpu"}, "train.toml")
                .spec.k8s.node_selector.at("cloud.example.com/pool"),
            "gpu");
}

TEST(Spec, PlatformDefaultsHoldOnlyK8sSettingsAndAreCheckedWhereTheyAreWritten) {
  auto platform_error = [](const std::string& platform) {
    try {
      load_string(kMinimal, {}, "train.toml", PlatformDefaults{platform, "platform.toml"});
    } catch (const Error& error) {
      EXPECT_EQ(error.code(), ExitCode::spec);
      return std::string(error.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(platform_error("[k8s]\nimage = \"x\"\n[train]\nepochs = 3\n"),
            "platform.toml:3:2: [train]: platform.toml holds only [k8s] settings; [train] belongs in the training spec");
  EXPECT_EQ(platform_error("[k8s]\nqeue = \"a\"\n").rfind("platform.toml:2:1: unknown key 'k8s.qeue'", 0), 0u)
      << platform_error("[k8s]\nqeue = \"a\"\n");
  EXPECT_EQ(platform_error("[k8s.node_selector]\n\"Bad Key\" = \"x\"\n"),
            "platform.toml:2:13: k8s.node_selector: 'Bad Key' is not a Kubernetes label key (such as "
            "\"nvidia.com/gpu.product\")");
  EXPECT_EQ(load_error(std::string(kMinimal) + "[k8s.volumes]\nTeam_Data = \"/data\"\n"),
            "train.toml:8:13: k8s.volumes: 'Team_Data' is not a PersistentVolumeClaim name (lowercase letters, digits, "
            "'-' and '.')");
}

TEST(Spec, RequirementsAndEnvAreForCommandMode) {
  EXPECT_EQ(load_error(std::string(kMinimal) + "[job]\nrequirements = \"requirements.txt\"\n"),
            "train.toml:8:1: job.requirements is for command mode: set job.command to the program it is for");
  EXPECT_EQ(load_error(kCommandMode, {"job.requirements=../outside.txt"}),
            "--set: job.requirements: '../outside.txt' must be a path inside the repository, such as "
            "\"requirements.txt\"");
}

TEST(Spec, ReferenceDocumentIsUpToDate) {
  std::ifstream in(testing::source_dir() + "/docs/spec.md");
  ASSERT_TRUE(in) << "docs/spec.md is missing";
  const std::string committed((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(committed, markdown_reference()) << "docs/spec.md is stale: run trainpoint spec-reference > docs/spec.md";
}

}  // namespace
}  // namespace tp::spec
