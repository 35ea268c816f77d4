// `trainpoint export --onnx` (runtime/command/onnx_export.h) as a user runs it, on a model trainpoint trained:
// the torch and onnx of the LibTorch under test export it (Debian's on the main line, as in the cpu image; the
// wheel's venv on the wheel line, as the gpu image's /opt/venv), ONNX Runtime from PyPI
// (scripts/install-python-tools) runs it.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "support/process.h"
#include "support/temp_dir.h"

namespace tp {
namespace {

namespace fs = std::filesystem;

// A Python whose torch is the LibTorch under test, with onnx (tests/CMakeLists.txt).
const std::string kTorchPython = TP_TORCH_PYTHON;
using testing::run_checked;
using testing::run_command;
using testing::shell_quote;

// A small image model, one epoch of 3 classes of generated images.
std::string trained_model(const testing::TempDir& dir) {
  run_checked(std::string(TP_MAKE_DATASET_BIN) + " images --out " + shell_quote((dir / "data").string()) +
              " --classes 3 --per-class 12 --size 24 --seed 4");
  testing::write_text(dir / "train.toml", "[job]\nname = \"shapes\"\noutput = \"out\"\n"
                                          "[data]\nsource = \"data\"\nformat = \"image_folder\"\nimage_size = 24\n"
                                          "normalize = \"imagenet\"\n[model]\narch = \"small_cnn\"\n"
                                          "[train]\nepochs = 1\nbatch_size = 16\n");
  const auto trained = testing::run_spec_in(dir.path());
  if (trained.exit_code != 0) throw std::runtime_error(trained.output);
  return (dir / "out" / "model.pt").string();
}

// `trainpoint export --onnx` through the torch and onnx of the LibTorch under test; ONNX Runtime (PyPI) runs the file on a batch of
// another size than the export's and gives the outputs LibTorch gives, and the metadata names the classes.
TEST(OnnxExport, RunsInOnnxRuntimeAsInLibTorchWithTheClassesInItsMetadata) {
  testing::TempDir dir;
  const std::string model = trained_model(dir);
  const auto exported = run_command("cd " + shell_quote(dir.path().string()) + " && " + testing::trainpoint_binary() +
                                    " export --model " + model + " --onnx shapes.onnx --python " + kTorchPython);
  ASSERT_EQ(exported.exit_code, 0) << exported.output;
  const std::string reference = R"(
import sys, numpy, torch
torch.manual_seed(7)
model = torch.jit.load(sys.argv[1]).eval()
batch = torch.randn(5, model.channels, model.image_size, model.image_size)
with torch.no_grad():
    numpy.save("outputs.npy", model(batch).numpy())
numpy.save("batch.npy", batch.numpy())
)";
  const std::string check = R"(
import json, numpy, onnxruntime
session = onnxruntime.InferenceSession("shapes.onnx", providers=["CPUExecutionProvider"])
metadata = session.get_modelmeta().custom_metadata_map
outputs = session.run(None, {"input": numpy.load("batch.npy")})[0]
print(json.dumps({"worst": float(abs(outputs - numpy.load("outputs.npy")).max()), "shape": list(outputs.shape),
                  "classes": json.loads(metadata["class_names"]), "task": metadata["task"],
                  "image_size": int(metadata["image_size"]), "pixel_std": json.loads(metadata["pixel_std"])}))
)";
  testing::write_text(dir / "reference.py", reference);
  testing::write_text(dir / "check.py", check);
  const std::string in_dir = "cd " + shell_quote(dir.path().string()) + " && ";
  run_checked(in_dir + kTorchPython + " reference.py " + model);
  const auto result = nlohmann::json::parse(run_checked(in_dir + testing::tools_python() + " check.py"));
  EXPECT_LT(result.at("worst").get<double>(), 1e-4) << result;
  EXPECT_EQ(result.at("shape"), nlohmann::json::parse("[5, 3]"));
  const auto run = nlohmann::json::parse(testing::read_text(dir / "out" / "run.json"));
  EXPECT_EQ(result.at("classes"), run.at("data").at("classes"));
  EXPECT_EQ(result.at("task"), "classification");
  EXPECT_EQ(result.at("image_size"), 24);
  EXPECT_EQ(result.at("pixel_std").size(), 3u);

  // A Python without onnx, and a model without trainpoint's attributes: named, with their exit classes.
  auto failed = run_command(in_dir + testing::trainpoint_binary() + " export --model " + model +
                            " --onnx other.onnx --python " + testing::tools_python());
  EXPECT_EQ(failed.exit_code, 9) << failed.output;
  EXPECT_NE(failed.output.find("export --onnx needs torch and onnx in this Python"), std::string::npos) << failed.output;
  run_checked(in_dir + kTorchPython + " -c " + shell_quote("import torch; torch.jit.script(torch.nn.Linear(3, 2)).save('plain.pt')"));
  failed = run_command(in_dir + testing::trainpoint_binary() + " export --model plain.pt --onnx other.onnx --python " + kTorchPython);
  EXPECT_EQ(failed.exit_code, 6) << failed.output;
  EXPECT_NE(failed.output.find("the model does not say how its input is made"), std::string::npos) << failed.output;
  EXPECT_FALSE(fs::exists(dir / "other.onnx"));
  for (const auto& entry : fs::directory_iterator(dir.path())) {
    EXPECT_EQ(entry.path().filename().string().find(".tmp"), std::string::npos) << entry.path() << " left behind";
  }
}

}  // namespace
}  // namespace tp
