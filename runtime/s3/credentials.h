// Where a job's S3 endpoint, region and credentials come from. Each source is tried in the documented
// order (docs/s3.md); the log names the source that was used, never a secret.
#pragma once

#include <optional>
#include <string>

#include "s3/sigv4.h"

namespace tp::s3 {

// What the spec or the command line may set; empty means "look further".
struct ConnectionOptions {
  std::string endpoint;  // e.g. http://minio.minio:9000
  std::string region;
  std::string credentials_file;    // shell `export` lines or JSON; else TRAINPOINT_S3_CREDENTIALS
  std::string tenant;              // selects /vault/secrets/minio-<tenant>; else TRAINPOINT_S3_TENANT
  std::string ca_bundle;           // PEM file of trusted CAs; else AWS_CA_BUNDLE
  std::optional<bool> path_style;  // default: path-style for custom endpoints, virtual-hosted for AWS
};

struct Connection {
  std::string endpoint;  // scheme://host[:port] without a trailing slash
  std::string endpoint_source;
  std::string region;
  bool path_style = true;
  Credentials credentials;
  std::string ca_bundle;
};

// Resolves endpoint, region and credentials from options, environment and files.
// Throws tp::Error(usage) when a named source (file, tenant, profile) is missing or unreadable.
Connection resolve_connection(const ConnectionOptions& options);

}  // namespace tp::s3
