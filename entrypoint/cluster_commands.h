// The commands that talk to the Kubernetes API server (runtime/k8s): submit, list, status, logs, cancel.
#pragma once

#include <string>

#include "cli.h"
#include "k8s/manifest.h"

namespace tp::cluster {

// Creates `manifest`, rendered from `request`, in request.name_space (k8s.namespace; empty: the context's), after
// checking that the Secret it reads credentials from is there.
int submit(const cli::ClusterOptions& options, const k8s::JobRequest& request, const std::string& manifest);
int list(const cli::ClusterOptions& options);
int status(const cli::ClusterOptions& options);
int logs(const cli::ClusterOptions& options);
int cancel(const cli::ClusterOptions& options);

}  // namespace tp::cluster
