// torchvision's ResNet (v1.5: the stride on the 3x3 convolution of a bottleneck), with its module
// names, so torchvision's state_dict loads as is. As torchvision, ReLU and the residual addition work in
// place: fewer fresh activations to allocate made a CPU training step about 10% faster.
#include <torch/script.h>
#include <torch/torch.h>

#include <algorithm>

#include "common/error.h"
#include "model/builtins.h"
#include "model/layers.h"

namespace tp::model {
namespace {

struct ResNetShape {
  bool bottleneck;
  std::vector<std::int64_t> blocks_per_layer;
};

ResNetShape resnet_shape(const std::string& arch) {
  if (arch == "resnet18") return {false, {2, 2, 2, 2}};
  if (arch == "resnet34") return {false, {3, 4, 6, 3}};
  if (arch == "resnet50") return {true, {3, 4, 6, 3}};
  fail(ExitCode::model, "model.arch '{}' is not a ResNet", arch);
}

// torchvision's downsample: Sequential(conv1x1 with the block's stride, BatchNorm2d).
torch::jit::Module downsample(LayerFactory& layers, std::int64_t in_channels, std::int64_t out_channels,
                              std::int64_t stride) {
  return sequential(
      layers, "Downsample",
      {layers.conv_without_bias(in_channels, out_channels, 1, stride, 0), layers.batch_norm(out_channels)});
}

// Blocks with a downsample have one more attribute than those without, hence two classes of each kind.
torch::jit::Module basic_block(LayerFactory& layers, std::int64_t in_channels, std::int64_t planes,
                               std::int64_t stride) {
  const bool needs_downsample = stride != 1 || in_channels != planes;
  torch::jit::Module block = layers.module(needs_downsample ? "BasicBlockWithDownsample" : "BasicBlock");
  block.register_module("conv1", layers.conv_without_bias(in_channels, planes, 3, stride, 1));
  block.register_module("bn1", layers.batch_norm(planes));
  block.register_module("conv2", layers.conv_without_bias(planes, planes, 3, 1, 1));
  block.register_module("bn2", layers.batch_norm(planes));
  if (needs_downsample) block.register_module("downsample", downsample(layers, in_channels, planes, stride));
  const std::string identity = needs_downsample ? "self.downsample.forward(x)" : "x";
  LayerFactory::define(block, R"(
def forward(self, x):
    out = torch.relu_(self.bn1.forward(self.conv1.forward(x)))
    out = self.bn2.forward(self.conv2.forward(out))
    return torch.relu_(out.add_()" + identity +
                                  R"())
)");
  return block;
}

torch::jit::Module bottleneck(LayerFactory& layers, std::int64_t in_channels, std::int64_t planes,
                              std::int64_t stride) {
  constexpr std::int64_t expansion = 4;
  const bool needs_downsample = stride != 1 || in_channels != planes * expansion;
  torch::jit::Module block = layers.module(needs_downsample ? "BottleneckWithDownsample" : "Bottleneck");
  block.register_module("conv1", layers.conv_without_bias(in_channels, planes, 1, 1, 0));
  block.register_module("bn1", layers.batch_norm(planes));
  block.register_module("conv2", layers.conv_without_bias(planes, planes, 3, stride, 1));
  block.register_module("bn2", layers.batch_norm(planes));
  block.register_module("conv3", layers.conv_without_bias(planes, planes * expansion, 1, 1, 0));
  block.register_module("bn3", layers.batch_norm(planes * expansion));
  if (needs_downsample) {
    block.register_module("downsample", downsample(layers, in_channels, planes * expansion, stride));
  }
  const std::string identity = needs_downsample ? "self.downsample.forward(x)" : "x";
  LayerFactory::define(block, R"(
def forward(self, x):
    out = torch.relu_(self.bn1.forward(self.conv1.forward(x)))
    out = torch.relu_(self.bn2.forward(self.conv2.forward(out)))
    out = self.bn3.forward(self.conv3.forward(out))
    return torch.relu_(out.add_()" + identity +
                                  R"())
)");
  return block;
}

// The side of the last stage's feature maps for images of `side` pixels: the stem's convolution and max pooling
// and the three stride-2 stages each halve it, rounding up.
std::int64_t last_stage_side(std::int64_t side) {
  for (int halvings = 0; halvings < 5; ++halvings) side = (side + 1) / 2;
  return side;
}

// Whether the last stage trains faster in NCHW than in channels_last on the CPU: ResNet-18's and -34's at 2x2 and
// smaller (images up to 64 pixels). There its weights (4.7M per block) outweigh its activations about 50 times,
// and oneDNN's convolution backward on channels_last hands each weight gradient back in NCHW for a copy into
// channels_last; in NCHW no copy. Measured with torchvision (docs/benchmarks.md, "The last stage in NCHW"):
// ResNet-18 at 64 +12-27% per step on LibTorch 1.13, +7-12% on 2.11, ResNet-34 +4-14%; at 3x3 (96 pixels) and
// above, and ResNet-50's wider bottleneck stage at 2x2, level or slower.
bool last_stage_in_nchw(const ResNetShape& shape, const data::Schema& schema) {
  const std::int64_t side = std::max(schema.input_shape[1], schema.input_shape[2]);
  return !shape.bottleneck && last_stage_side(side) <= 2;
}

}  // namespace

torch::jit::Module resnet(const std::string& arch, const data::Schema& schema) {
  if (schema.input_shape.size() != 3) {
    fail(ExitCode::model, "model.arch '{}' needs images, but samples have shape [{}]", arch,
         fmt::join(schema.input_shape, ", "));
  }
  const ResNetShape shape = resnet_shape(arch);
  LayerFactory layers;
  torch::jit::Module net = layers.module("ResNet");
  net.register_module("conv1", layers.conv_without_bias(schema.input_shape[0], 64, 7, 2, 3));
  net.register_module("bn1", layers.batch_norm(64));
  std::int64_t channels = 64;
  for (std::size_t layer = 0; layer < shape.blocks_per_layer.size(); ++layer) {
    const std::int64_t planes = std::int64_t{64} << layer;
    std::vector<torch::jit::Module> blocks;
    for (std::int64_t i = 0; i < shape.blocks_per_layer[layer]; ++i) {
      const std::int64_t stride = layer > 0 && i == 0 ? 2 : 1;
      blocks.push_back(shape.bottleneck ? bottleneck(layers, channels, planes, stride)
                                        : basic_block(layers, channels, planes, stride));
      channels = shape.bottleneck ? planes * 4 : planes;
    }
    // Each layer's sequence of block classes differs (layer1 of resnet18 has no downsample), so one class
    // each.
    const std::string name = "layer" + std::to_string(layer + 1);
    net.register_module(name, sequential(layers, "ResNetLayer" + std::to_string(layer + 1), blocks));
  }
  net.register_module("fc", layers.linear(channels, schema.num_outputs));
  const bool nchw_last_stage = last_stage_in_nchw(shape, schema);
  net.register_attribute(kCpuNchwModules, c10::ListType::ofStrings(),
                         c10::List<std::string>(nchw_last_stage ? std::vector<std::string>{"layer4"}
                                                                : std::vector<std::string>{}));
  // contiguous() is a no-op on NCHW inputs, so the saved model takes any layout.
  LayerFactory::define(net, std::string(R"(
def forward(self, x):
    x = torch.relu_(self.bn1.forward(self.conv1.forward(x)))
    x = torch.max_pool2d(x, [3, 3], [2, 2], [1, 1])
    x = self.layer3.forward(self.layer2.forward(self.layer1.forward(x)))
)") + (nchw_last_stage ? "    x = self.layer4.forward(x.contiguous())\n" : "    x = self.layer4.forward(x)\n") + R"(
    x = torch.flatten(torch.adaptive_avg_pool2d(x, [1, 1]), 1)
    return self.fc.forward(x)
)");
  return net;
}

}  // namespace tp::model
