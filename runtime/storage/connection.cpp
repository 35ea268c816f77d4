#include "storage/connection.h"

namespace tp::storage {

s3::ConnectionOptions connection_options(const spec::DataSpec& spec) {
  s3::ConnectionOptions options;
  options.endpoint = spec.endpoint;
  options.credentials_file = spec.credentials;
  return options;
}

}  // namespace tp::storage
