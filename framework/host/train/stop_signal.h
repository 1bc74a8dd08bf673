#pragma once
// SIGINT and SIGTERM during training: the first stops every rank after the same step (with a
// checkpoint); a second kills at once.

#include <bertlab/communicator.h>

namespace bertlab {

/// From now on SIGINT and SIGTERM ask the run to stop after the current step.
void install_stop_handlers();

/// The signal received since install_stop_handlers(), or 0.
int stop_signal_received();

/// Whether any rank received a signal: the rank threads read the flag at different moments and
/// processes each get their own signal, so the ranks agree through one all-reduce.
bool ranks_agree_to_stop(Communicator& comm);

/// "SIGINT" or "SIGTERM".
const char* signal_name(int signal);

}  // namespace bertlab
