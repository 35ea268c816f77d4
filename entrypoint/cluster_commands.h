// The commands that talk to the Kubernetes API server (runtime/k8s): submit, list, status, logs, cancel.
#pragma once

#include <string>

#include "cli.h"
#include "k8s/manifest.h"

namespace tp::cluster {

// Creates `manifest` (a job of `kind`) in `name_space` (k8s.namespace; empty: --namespace's or the context's).
int submit(const cli::ClusterOptions& options, k8s::Kind kind, const std::string& name_space,
           const std::string& manifest);
int list(const cli::ClusterOptions& options);
int status(const cli::ClusterOptions& options);
int logs(const cli::ClusterOptions& options);
int cancel(const cli::ClusterOptions& options);

}  // namespace tp::cluster
