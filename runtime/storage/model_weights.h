// model.weights may name an object in S3: pretrained weights shared by many runs stay out of the repository.
#pragma once

#include <filesystem>

#include "spec/spec.h"

namespace tp::storage {

// For `model.weights = "s3://bucket/key"`: downloads the object (verified, through a temporary name) to
// <workdir>/weights/<bucket>/<key>, unless a file of the object's size is already there, and returns the
// model spec with `weights` set to that file. Other specs are returned as they are. Uses the data's
// endpoint and credentials. Throws tp::Error: model (no such object), network/storage (S3 failures).
spec::ModelSpec with_local_weights(const spec::Spec& spec, const std::filesystem::path& workdir);

}  // namespace tp::storage
