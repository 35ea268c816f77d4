// `trainpoint make-dataset`: learnable synthetic data to try trainpoint with (the examples, the demo), also for
// tests and benchmarks (tests/tools/tp-make-dataset runs the same code without loading LibTorch).
//   make-dataset images --out DIR [--classes 3] [--per-class 60 | --count N] [--size 32 | WxH]
//                       [--format png|jpeg|mixed] [--channels 3] [--seed 1]
//   make-dataset table --out FILE.csv [--rows 1000] [--task classification|regression] [--seed 1]
#pragma once

#include <string>
#include <vector>

namespace tp::data {

// `args` are the words after the command; `program` names it in the help. Prints what it made; returns the
// exit code (2 with the help on stderr when the kind or --out is missing). Throws tp::Error for bad arguments
// (usage) and files it cannot write.
int run_make_dataset(const std::string& program, const std::vector<std::string>& args);

}  // namespace tp::data
