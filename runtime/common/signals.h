// SIGTERM and SIGINT as a request to stop at the next safe point (Kubernetes sends SIGTERM before
// it kills a pod): the training loop saves a checkpoint there and exits 143.
#pragma once

namespace tp {

// Installs handlers that only set a flag. Safe to call more than once.
void install_stop_handlers();
bool stop_requested();

// A write to a socket whose peer is gone fails with EPIPE (Gloo then reports the lost rank, exit 202)
// instead of killing the process with SIGPIPE (exit 141). For the whole process: Gloo writes from its
// own threads. Programs trainpoint starts get the default back (restore_broken_pipe_default in the child).
void ignore_broken_pipes();
void restore_broken_pipe_default();

}  // namespace tp
