// SIGTERM and SIGINT as a request to stop at the next safe point (Kubernetes sends SIGTERM before
// it kills a pod): the training loop saves a checkpoint there and exits 143.
#pragma once

namespace tp {

// Installs handlers that only set a flag. Safe to call more than once.
void install_stop_handlers();
bool stop_requested();

}  // namespace tp
