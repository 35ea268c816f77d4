#include "command/onnx_export.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "command/process.h"
#include "common/error.h"
#include "common/files.h"

namespace tp::command {

namespace fs = std::filesystem;

namespace {

// argv: MODEL OUT OPSET. Exit 3: torch or onnx missing; 4: the model lacks trainpoint's attributes; 5: the export
// failed. The metadata's values are strings: lists and numbers as JSON.
constexpr const char* kScript = R"py(
import inspect, json, sys
try:
    import torch, onnx
except ImportError as error:
    print(f"{error}: export --onnx needs torch and onnx in this Python", file=sys.stderr)
    sys.exit(3)
model_path, out_path, opset = sys.argv[1], sys.argv[2], int(sys.argv[3])
model = torch.jit.load(model_path, map_location="cpu").eval()
if not hasattr(model, "task") or not (hasattr(model, "feature_names") or hasattr(model, "image_size")):
    print("the model does not say how its input is made (no 'task', 'image_size' or 'feature_names' attribute)",
          file=sys.stderr)
    sys.exit(4)
table = hasattr(model, "feature_names")
shape = [2, len(model.feature_names)] if table else [2, model.channels, model.image_size, model.image_size]
names = ["task", "class_names", "feature_names", "feature_mean", "feature_std", "feature_fill", "image_size",
         "channels", "resize", "pixel_mean", "pixel_std"]
metadata = {name: getattr(model, name) for name in names if hasattr(model, name)}
options = {"dynamo": False} if "dynamo" in inspect.signature(torch.onnx.export).parameters else {}
try:
    with torch.no_grad():
        torch.onnx.export(model, (torch.zeros(shape),), out_path, input_names=["input"], output_names=["output"],
                          dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}}, opset_version=opset,
                          **options)
    exported = onnx.load(out_path)
    for name, value in metadata.items():
        entry = exported.metadata_props.add()
        entry.key, entry.value = name, value if isinstance(value, str) else json.dumps(value)
    exported.doc_string = "exported by trainpoint export --onnx from " + model_path.rsplit("/", 1)[-1]
    onnx.checker.check_model(exported)
    onnx.save(exported, out_path)
except Exception as error:
    print(f"{type(error).__name__}: {error}", file=sys.stderr)
    sys.exit(5)
print(json.dumps({"input": shape[1:], "metadata": sorted(metadata)}))
)py";

}  // namespace

void export_onnx(const OnnxExport& request) {
  if (!fs::is_regular_file(request.model)) fail(ExitCode::model, "--model {}: no such file", request.model.string());
  const fs::path out = fs::absolute(request.out);
  const fs::path draft = temporary_sibling(out);
  ProcessResult result;
  try {
    result = run_process({request.python, {"-c", kScript, fs::absolute(request.model).string(), draft.string(),
                                           std::to_string(request.opset)}, {}});
  } catch (...) {
    fs::remove(draft);
    throw;
  }
  const std::string why = fmt::format("{}", fmt::join(last_lines(result.output, 3), "; "));
  if (result.exit_code != 0) {
    std::error_code ignored;
    fs::remove(draft, ignored);
  }
  switch (result.exit_code) {
    case 0: break;
    case 127: fail(ExitCode::requirements, "export --onnx: cannot run {}: {}", request.python, why);
    case 3: fail(ExitCode::requirements, "export --onnx: {}: {}", request.python, why);
    case 4: fail(ExitCode::model, "export --onnx: {}: {}: give a model.pt that trainpoint saved", request.model.string(), why);
    default: fail(ExitCode::model, "export --onnx: PyTorch could not export {} (exit {}): {}", request.model.string(),
                  result.exit_code, why);
  }
  commit_file(draft, out);
  spdlog::info("wrote {} ({} with {})", out.string(), last_lines(result.output, 1).front(), request.python);
}

}  // namespace tp::command
