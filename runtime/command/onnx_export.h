// `trainpoint export --onnx`: a model.pt trainpoint saved, as an ONNX file for people and runtimes without
// PyTorch. LibTorch has no ONNX exporter, so PyTorch's (torch.onnx, TorchScript-based) runs in a Python that has
// torch and the onnx package (the cpu image's /usr/bin/python3 does). The model's classes and preprocessing go
// into the file's metadata (docs/training.md, "ONNX").
#pragma once

#include <filesystem>
#include <string>

namespace tp::command {

struct OnnxExport {
  std::filesystem::path model;  // a local model.pt
  std::filesystem::path out;    // the .onnx file, written under a temporary name and renamed
  std::string python = "python3";  // a path, or a name looked up in PATH
  int opset = 17;
};

// Throws tp::Error: requirements (no such Python, or one without torch or onnx), model (the model has none of
// trainpoint's attributes, or PyTorch cannot export it; its last lines in the message), output (cannot write).
void export_onnx(const OnnxExport& request);

}  // namespace tp::command
