#pragma once
// The command-line tools of the SQuAD plugin: `bertlab squad features|evaluate|train` and
// `bertlab bench squad-features`. Each returns the process exit code.

#include <string>
#include <vector>

namespace bertlab::squad {

/// `bertlab squad features --vocab_file V --input FILE.json [--training] ...`: JSON Lines.
int features_tool(const std::vector<std::string>& args);
/// `bertlab bench squad-features --vocab_file V --input FILE.json`: features per second.
int bench_features_tool(const std::vector<std::string>& args);
/// `bertlab squad evaluate --data_file DEV.json --pred_file PRED.json [--na_prob_file F]`.
int evaluate_tool(const std::vector<std::string>& args);
/// `bertlab squad train <run_squad.py flags>`: runs (or writes) the equivalent experiment.
int train_tool(const std::vector<std::string>& args);

}  // namespace bertlab::squad
