// fastai's TabularModel on table_csv features. The data module one-hot encodes a categorical column
// into the features "column=level", so its embedding is a linear layer without bias on those columns
// (an embedding lookup written as a product with the one-hot vector); continuous features go through
// batch norm; then, for each `model.hidden` width, linear (no bias), ReLU and batch norm; then the head.
#include <torch/script.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>

#include "common/error.h"
#include "model/builtins.h"
#include "model/layers.h"

namespace tp::model {
namespace {

// A run of consecutive features: one categorical column's levels, or continuous columns.
struct FeatureRun {
  std::int64_t start = 0;
  std::int64_t count = 0;
  bool categorical = false;
};

std::string column_of(const std::string& feature) {
  return feature.substr(0, feature.find('='));
}

std::vector<FeatureRun> feature_runs(const std::vector<std::string>& features) {
  std::vector<FeatureRun> runs;
  for (std::size_t i = 0; i < features.size(); ++i) {
    const bool categorical = features[i].find('=') != std::string::npos;
    const bool continues_run = !runs.empty() && runs.back().categorical == categorical &&
                               (!categorical || column_of(features[i]) == column_of(features[i - 1]));
    if (!continues_run) runs.push_back({static_cast<std::int64_t>(i), 0, categorical});
    ++runs.back().count;
  }
  return runs;
}

// fastai's emb_sz_rule, counting its extra "#na#" level.
std::int64_t embedding_size(std::int64_t levels) {
  return std::min<std::int64_t>(600, std::llround(1.6 * std::pow(static_cast<double>(levels + 1), 0.56)));
}

std::string narrow(const FeatureRun& run) {
  return fmt::format("x.narrow(1, {}, {})", run.start, run.count);
}

}  // namespace

torch::jit::Module tabular(const std::vector<std::int64_t>& hidden, const data::Schema& schema) {
  if (schema.input_shape.size() != 1 ||
      schema.feature_names.size() != static_cast<std::size_t>(schema.input_shape[0])) {
    fail(ExitCode::model,
         "model.arch 'tabular' needs table_csv data (named features), but samples have shape [{}]",
         fmt::join(schema.input_shape, ", "));
  }
  LayerFactory layers;
  torch::jit::Module net = layers.module("TabularModel");
  torch::jit::Module embeddings = layers.module("Embeddings");
  std::vector<std::string> inputs;  // the forward's expressions concatenated as the first layer's input
  std::vector<std::string> continuous;
  std::int64_t width = 0;
  std::int64_t continuous_count = 0;
  for (const FeatureRun& run : feature_runs(schema.feature_names)) {
    if (!run.categorical) {
      continuous.push_back(narrow(run));
      continuous_count += run.count;
      continue;
    }
    const std::string name = std::to_string(inputs.size());
    const std::int64_t size = embedding_size(run.count);
    torch::jit::Module embedding = layers.linear_without_bias(run.count, size);
    // fastai's embedding initialisation: N(0, 0.01).
    embedding.attr("weight").toTensor().detach().normal_(0.0, 0.01);
    embeddings.register_module(name, embedding);
    inputs.push_back(fmt::format("getattr(self.embeds, \"{}\").forward({})", name, narrow(run)));
    width += size;
  }
  if (!inputs.empty()) net.register_module("embeds", embeddings);
  if (continuous_count > 0) {
    net.register_module("bn_cont", layers.batch_norm(continuous_count));
    inputs.push_back(fmt::format("self.bn_cont.forward(torch.cat([{}], 1))", fmt::join(continuous, ", ")));
    width += continuous_count;
  }

  std::vector<torch::jit::Module> blocks;
  for (const std::int64_t units : hidden) {
    torch::jit::Module block = layers.module("LinearReluBatchNorm");
    block.register_module("linear", layers.linear_without_bias(width, units));
    block.register_module("bn", layers.batch_norm(units));
    LayerFactory::define(block, R"(
def forward(self, x):
    return self.bn.forward(torch.relu_(self.linear.forward(x)))
)");
    blocks.push_back(block);
    width = units;
  }
  net.register_module("layers", sequential(layers, "TabularLayers", blocks));
  net.register_module("head", layers.linear(width, schema.num_outputs));
  LayerFactory::define(net, fmt::format(R"(
def forward(self, x):
    x = torch.cat([{}], 1)
    return self.head.forward(self.layers.forward(x))
)",
                                        fmt::join(inputs, ", ")));
  return net;
}

}  // namespace tp::model
