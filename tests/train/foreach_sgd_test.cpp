// The foreach SGD (train/foreach_sgd.h) against torch::optim::SGD, step for step on the CPU, where both compute
// each element with the same operations: equal parameters and state with every option (momentum, dampening,
// Nesterov, weight decay), two groups with their own learning rates, a parameter without a gradient, and
// either optimizer's saved state going on in the other.
#include "train/foreach_sgd.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <sstream>

namespace tp::train {
namespace {

struct Model {
  std::vector<torch::Tensor> body, head;  // head[1] never gets a gradient
};

Model model() {
  torch::manual_seed(3);
  Model m;
  for (const auto& shape : {std::vector<std::int64_t>{4, 3}, {3}}) m.body.push_back(torch::randn(shape));
  for (const auto& shape : {std::vector<std::int64_t>{2, 4}, {2}}) m.head.push_back(torch::randn(shape));
  return m;
}

std::vector<torch::optim::OptimizerParamGroup> groups(const Model& m) {
  std::vector<torch::optim::OptimizerParamGroup> g{torch::optim::OptimizerParamGroup(m.body),
                                                    torch::optim::OptimizerParamGroup(m.head)};
  g[0].set_options(std::make_unique<torch::optim::SGDOptions>(0.01));
  return g;
}

// `steps` steps of `optimizer` on `m`, with gradients drawn from `seed` (the same for both optimizers).
void train(torch::optim::Optimizer& optimizer, Model& m, int steps, std::uint64_t seed) {
  torch::manual_seed(seed);
  for (int i = 0; i < steps; ++i) {
    for (auto* tensors : {&m.body, &m.head}) {
      for (std::size_t j = 0; j < tensors->size(); ++j) {
        const bool without = tensors == &m.head && j == 1;
        (*tensors)[j].mutable_grad() = without ? torch::Tensor() : torch::randn((*tensors)[j].sizes());
      }
    }
    optimizer.step();
  }
}

void expect_equal(const Model& a, const Model& b, const std::string& options) {
  for (std::size_t i = 0; i < a.body.size(); ++i) EXPECT_TRUE(torch::equal(a.body[i], b.body[i])) << options;
  for (std::size_t i = 0; i < a.head.size(); ++i) EXPECT_TRUE(torch::equal(a.head[i], b.head[i])) << options;
}

TEST(ForeachSGD, StepsAsTorchsSGDWithEveryOption) {
  const std::vector<torch::optim::SGDOptions> all{
      torch::optim::SGDOptions(0.1),
      torch::optim::SGDOptions(0.1).momentum(0.9),
      torch::optim::SGDOptions(0.1).momentum(0.9).weight_decay(0.01),
      torch::optim::SGDOptions(0.1).momentum(0.9).dampening(0.25),
      torch::optim::SGDOptions(0.1).momentum(0.9).nesterov(true).weight_decay(0.05),
  };
  for (const auto& options : all) {
    std::ostringstream name;
    name << "momentum " << options.momentum() << ", dampening " << options.dampening() << ", weight decay "
         << options.weight_decay() << ", nesterov " << options.nesterov();
    Model theirs = model(), mine = model();
    torch::optim::SGD reference(groups(theirs), options);
    ForeachSGD foreach(groups(mine), options);
    train(reference, theirs, 4, 11);
    train(foreach, mine, 4, 11);
    expect_equal(theirs, mine, name.str());
    EXPECT_FALSE(torch::equal(mine.body[0], model().body[0])) << "the parameters moved";
    EXPECT_TRUE(torch::equal(mine.head[1], model().head[1])) << "no gradient, no step";
  }
}

TEST(ForeachSGD, EitherOptimizersSavedStateGoesOnInTheOther) {
  const auto options = torch::optim::SGDOptions(0.1).momentum(0.9).weight_decay(0.01);
  Model theirs = model(), mine = model();
  torch::optim::SGD reference(groups(theirs), options);
  ForeachSGD foreach(groups(mine), options);
  train(foreach, mine, 3, 5);
  train(reference, theirs, 3, 5);

  // Each loads the other's state and takes the same steps.
  std::stringstream from_foreach, from_reference;
  torch::serialize::OutputArchive foreach_archive, reference_archive;
  foreach.save(foreach_archive);
  reference.save(reference_archive);
  foreach_archive.save_to(from_foreach);
  reference_archive.save_to(from_reference);
  torch::serialize::InputArchive into_reference, into_foreach;
  into_reference.load_from(from_foreach);
  into_foreach.load_from(from_reference);
  reference.load(into_reference);
  foreach.load(into_foreach);
  train(foreach, mine, 2, 9);
  train(reference, theirs, 2, 9);
  expect_equal(theirs, mine, "after exchanging their states");
}

}  // namespace
}  // namespace tp::train
