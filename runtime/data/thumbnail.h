// A model input drawn back as a small image, for the report's top losses: what the model saw, not the file.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>

#include "data/schema.h"

namespace tp::data {

// `input` (channels x height x width, normalized as `schema` says) with the normalization undone, shrunk by
// averaging to at most `max_size` pixels a side, as JPEG bytes. Throws tp::Error (internal) when `input` is not
// an image of `schema`'s channels.
std::string thumbnail_jpeg(const at::Tensor& input, const Schema& schema, int max_size);

}  // namespace tp::data
