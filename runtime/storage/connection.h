// The spec's S3 settings (`data.endpoint`, `data.credentials`), for the data and for s3:// outputs alike.
#pragma once

#include "s3/credentials.h"
#include "spec/spec.h"

namespace tp::storage {

s3::ConnectionOptions connection_options(const spec::DataSpec& spec);

}  // namespace tp::storage
