#include "storage/model_weights.h"

#include <spdlog/spdlog.h>

#include "common/error.h"
#include "common/files.h"
#include "s3/client.h"
#include "s3/credentials.h"
#include "s3/paths.h"
#include "storage/connection.h"

namespace tp::storage {

namespace fs = std::filesystem;

spec::ModelSpec with_local_weights(const spec::Spec& spec, const fs::path& workdir) {
  spec::ModelSpec model = spec.model;
  if (!s3::is_s3_url(model.weights)) return model;
  const s3::S3Url url = s3::parse_s3_url(model.weights);
  if (url.key.empty() || url.key.back() == '/') {
    fail(ExitCode::spec, "model.weights: {} names a prefix, not an object", model.weights);
  }
  s3::Client client(s3::resolve_connection(connection_options(spec.data)));
  const auto object = client.head(url.bucket, url.key);
  if (!object) fail(ExitCode::model, "model.weights: {}: no such object", model.weights);
  // The key becomes a path below the bucket's directory, refused if it could escape it.
  const fs::path target =
      fs::absolute(workdir / "weights" / url.bucket / s3::local_path_for_key(url.key, ""));
  if (!has_size(target, object->size)) {
    spdlog::info("downloading model.weights {} ({} bytes)", model.weights, object->size);
    fs::create_directories(target.parent_path());
    client.download(url.bucket, {{*object, target}});
  }
  model.weights = target.string();
  return model;
}

}  // namespace tp::storage
