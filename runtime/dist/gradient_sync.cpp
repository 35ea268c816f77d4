#include "dist/gradient_sync.h"

#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/torch.h>

#include "common/error.h"

namespace tp::dist {

struct GradientSynchronizer::Bucket {
  std::vector<std::size_t> members;  // parameter indices, in the order they were bucketed
  std::size_t bytes = 0;
  at::Tensor buffer;                 // the members' gradients, flattened
  std::size_t waiting = 0;           // members whose gradient is not ready yet this step
  std::unique_ptr<PendingCollective> work;
};

struct GradientSynchronizer::Hook {
  std::shared_ptr<torch::autograd::Node> accumulator;
  std::uintptr_t key;
};

GradientSynchronizer::GradientSynchronizer(std::vector<at::Tensor> parameters, std::vector<std::string> names,
                                           Communicator& communicator, BucketOptions options)
    : parameters_(std::move(parameters)),
      names_(std::move(names)),
      communicator_(communicator),
      options_(options),
      bucket_of_(parameters_.size()),
      ready_(parameters_.size(), false) {
  // Reverse registration order; a new bucket when the cap is reached or the dtype/device changes.
  for (std::size_t i = parameters_.size(); i-- > 0;) {
    const at::Tensor& parameter = parameters_[i];
    const std::size_t bytes = static_cast<std::size_t>(parameter.numel()) * parameter.element_size();
    bool start_new = buckets_.empty();
    if (!start_new) {
      const Bucket& last = *buckets_.back();
      const std::size_t cap = buckets_.size() == 1 ? options_.first_bucket_bytes : options_.bucket_bytes;
      start_new = !parameters_[last.members.front()].options().type_equal(parameter.options()) ||
                  last.bytes + bytes > cap;
    }
    if (start_new) buckets_.push_back(std::make_unique<Bucket>());
    Bucket& bucket = *buckets_.back();
    bucket.members.push_back(i);
    bucket.bytes += bytes;
    bucket_of_[i] = buckets_.size() - 1;
  }
  for (auto& bucket : buckets_) {
    std::int64_t elements = 0;
    for (std::size_t i : bucket->members) elements += parameters_[i].numel();
    bucket->buffer = torch::empty({elements}, parameters_[bucket->members.front()].options());
    bucket->waiting = bucket->members.size();
  }
  for (std::size_t i = 0; i < parameters_.size(); ++i) {
    auto accumulator = torch::autograd::impl::grad_accumulator(parameters_[i]);
    if (!accumulator) fail(ExitCode::model, "parameter {} does not require a gradient", names_[i]);
    const auto key = accumulator->add_post_hook(std::make_unique<torch::autograd::utils::LambdaPostHook>(
        [this, i](const torch::autograd::variable_list& outputs, const torch::autograd::variable_list&) {
          on_gradient_ready(i);
          return outputs;
        }));
    hooks_.push_back({accumulator, key});
  }
}

GradientSynchronizer::~GradientSynchronizer() {
  for (auto& hook : hooks_) hook.accumulator->del_post_hook(hook.key);
}

void GradientSynchronizer::on_gradient_ready(std::size_t parameter_index) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!enabled_ || ready_[parameter_index]) return;
  ready_[parameter_index] = true;
  if (--buckets_[bucket_of_[parameter_index]]->waiting == 0) launch_ready_buckets();
}

void GradientSynchronizer::launch_ready_buckets() {
  while (next_to_launch_ < buckets_.size() && buckets_[next_to_launch_]->waiting == 0) {
    launch(*buckets_[next_to_launch_++]);
  }
}

void GradientSynchronizer::launch(Bucket& bucket) {
  if (next_to_launch_ == 1) timing_.first_launch = std::chrono::steady_clock::now();
  torch::NoGradGuard no_grad;
  std::int64_t offset = 0;
  for (std::size_t i : bucket.members) {
    const std::int64_t n = parameters_[i].numel();
    bucket.buffer.slice(0, offset, offset + n).copy_(parameters_[i].grad().reshape({-1}));
    offset += n;
  }
  // Pre-divide, as PyTorch's DDP does, so the sum is the average.
  bucket.buffer.div_(communicator_.world_size());
  bucket.work = communicator_.all_reduce_sum_async(bucket.buffer);
}

void GradientSynchronizer::finish() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!enabled_) return;
  timing_.backward_done = std::chrono::steady_clock::now();
  std::vector<std::string> missing;
  for (std::size_t i = 0; i < parameters_.size(); ++i) {
    if (!ready_[i]) missing.push_back(names_[i]);
  }
  if (!missing.empty()) {
    if (!options_.allow_unused_parameters) {
      fail(ExitCode::model,
           "rank {}: {} parameter(s) got no gradient in this step: {}. Every parameter must take part in the loss, "
           "or set dist.allow_unused_parameters = true to count them as zero",
           communicator_.rank(), missing.size(), fmt::join(missing, ", "));
    }
    for (std::size_t i = 0; i < parameters_.size(); ++i) {
      if (ready_[i]) continue;
      if (!parameters_[i].grad().defined()) parameters_[i].mutable_grad() = torch::zeros_like(parameters_[i]);
      ready_[i] = true;
      --buckets_[bucket_of_[i]]->waiting;
    }
    launch_ready_buckets();
  }
  torch::NoGradGuard no_grad;
  for (auto& bucket : buckets_) {
    bucket->work->wait();
    bucket->work.reset();
    std::int64_t offset = 0;
    for (std::size_t i : bucket->members) {
      const std::int64_t n = parameters_[i].numel();
      parameters_[i].grad().copy_(bucket->buffer.slice(0, offset, offset + n).view_as(parameters_[i]));
      offset += n;
    }
    bucket->waiting = bucket->members.size();
  }
  std::fill(ready_.begin(), ready_.end(), false);
  next_to_launch_ = 0;
  timing_.all_done = std::chrono::steady_clock::now();
}

}  // namespace tp::dist
