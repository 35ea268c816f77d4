#include "train/lr_find.h"

#include <torch/script.h>
#include <torch/torch.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/files.h"
#include "common/log.h"
#include "data/loader.h"
#include "model/model.h"
#include "train/precision.h"
#include "train/report.h"
#include "train/training_step.h"

namespace tp::train {

namespace fs = std::filesystem;

namespace {

constexpr std::int64_t kSteps = 100;

// Sets suggested_lr and steepest_lr from the points; returns the index of the point of the lowest loss. As
// fastai, the suggestions skip the first tenth of the planned steps (the average is still settling) and the
// last 5 (the loss blowing up), unless that leaves too few.
std::size_t suggest(LrFindResult& result) {
  const std::size_t n = result.points.size();
  std::size_t first = kSteps / 10, end = n > 5 ? n - 5 : n;
  if (end < first + 2) {
    first = 0;
    end = n;
  }
  std::size_t lowest = first, steepest = first;
  double steepest_slope = INFINITY;
  for (std::size_t i = first; i < end; ++i) {
    if (result.points[i].smoothed_loss < result.points[lowest].smoothed_loss) lowest = i;
    if (i + 1 >= end) continue;
    const auto& here = result.points[i];
    const auto& next = result.points[i + 1];
    const double slope = (next.smoothed_loss - here.smoothed_loss) / (std::log(next.lr) - std::log(here.lr));
    if (slope < steepest_slope) {
      steepest_slope = slope;
      steepest = i;
    }
  }
  result.suggested_lr = result.points[lowest].lr / 10;
  result.steepest_lr = result.points[steepest].lr;
  return lowest;
}

// lr_find.jsonl and lr_find.html, and the suggestion's line.
void write_outputs(const LrFindResult& result, std::size_t lowest, const std::string& job_name,
                   const fs::path& output_dir) {
  fs::create_directories(output_dir);
  std::string lines;
  for (const LrFindPoint& p : result.points) {
    lines += nlohmann::json{{"step", p.step}, {"lr", p.lr}, {"loss", json_number(p.loss)},
                            {"smoothed_loss", json_number(p.smoothed_loss)}}
                 .dump() +
             "\n";
  }
  write_file_atomic(output_dir / "lr_find.jsonl", lines);
  write_file_atomic(output_dir / "lr_find.html",
                    render_lr_find(job_name, result.points, result.suggested_lr, result.steepest_lr));
  spdlog::info("lr_find: {} steps; suggested train.lr {:.3g} (a tenth of the lr with the lowest loss, {:.3g}); "
               "steepest descent at {:.3g}; see {}",
               result.points.size(), result.suggested_lr, result.points[lowest].lr, result.steepest_lr,
               (output_dir / "lr_find.html").string());
}

}  // namespace

LrFindResult find_learning_rate(torch::jit::Module& model, const data::Datasets& data, const spec::Spec& spec,
                                dist::Communicator& communicator, const fs::path& output_dir,
                                const FitEnvironment& environment) {
  constexpr double kStartLr = 1e-7, kEndLr = 10.0, kBeta = 0.98;
  const c10::Device device = environment.device;
  Precision precision(spec.train.precision, device);
  Parameters placed = place_model(model, spec, device);
  std::vector<torch::Tensor>& parameters = placed.tensors;
  if (spec.train.freeze_epochs > 0) model::set_body_trainable(model, false);
  auto optimizer = make_optimizer(spec.train, {torch::optim::OptimizerParamGroup(parameters)});
  model.train();
  start_from_rank_0(model, parameters, communicator);
  std::optional<dist::GradientSynchronizer> synchronizer;
  synchronize_trainable(synchronizer, placed, spec, communicator);
  const EpochSamples samples(data, spec, communicator);

  LrFindResult result;
  double average = 0, best = INFINITY;
  bool done = false;
  for (std::int64_t epoch = 0; !done; ++epoch) {
    data::Loader loader(data.train, samples.of_rank(epoch, 0), epoch, loader_options(spec, device));
    if (loader.num_batches() == 0) fail(ExitCode::data, "lr_find: no training samples on rank {}", communicator.rank());
    try {
      while (auto next = loader.next()) {
        const auto batch = on_device(std::move(*next), device, uses_channels_last(spec));
        const auto step = static_cast<std::int64_t>(result.points.size());
        const double lr = kStartLr * std::pow(kEndLr / kStartLr, static_cast<double>(step) / (kSteps - 1));
        set_learning_rate(*optimizer, lr, 1.0);
        drop_gradients(*optimizer);
        const torch::Tensor loss = loss_of(precision.forward(model, batch.inputs), batch.targets, data.schema,
                                           spec.train.label_smoothing);
        precision.scaled(loss).backward();
        if (synchronizer) synchronizer->finish();
        apply_gradients(precision, parameters, spec.train, *optimizer);
        std::vector<torch::Tensor> losses{loss.detach().to(torch::kDouble).reshape({1})};
        communicator.all_reduce_sum(losses);
        const double mean_loss = losses[0].item<double>() / communicator.world_size();
        average = kBeta * average + (1 - kBeta) * mean_loss;
        const double smoothed = average / (1 - std::pow(kBeta, static_cast<double>(step + 1)));
        result.points.push_back({step + 1, lr, mean_loss, smoothed});
        best = std::min(best, smoothed);
        done = !std::isfinite(smoothed) || smoothed > 4 * best || step + 1 == kSteps;
        if (done) break;
      }
    } catch (const c10::Error& error) {
      fail(ExitCode::training, "lr_find: {}", error.what_without_backtrace());
    }
  }

  const std::size_t lowest = suggest(result);
  if (communicator.rank() == 0) write_outputs(result, lowest, spec.job.name, output_dir);
  communicator.barrier();
  return result;
}

}  // namespace tp::train
