#pragma once
// Communicators over c10d's ProcessGroupGloo. The ranks meet through a RendezvousStore
// (comm/rendezvous_store.h).

#include <bertlab/communicator.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "comm/gloo_binding.h"
#include "comm/rendezvous_store.h"

namespace bertlab {

/// Joins the group as `rank` of `world_size` (blocks until every rank has joined or `timeout`
/// passes). Every collective of the result fails after `timeout` instead of hanging, and first
/// checks that every rank passes the same sizes (an error, not a hang or silent corruption,
/// when they do not). While it lives, a heartbeat in the store tells the others this rank is
/// alive, so that a failed collective names a rank that was killed or crashed.
/// `binding`: where this rank's sockets bind (loopback for ranks on this machine; see
/// choose_gloo_binding). `device`: where this rank's tensors live (Gloo stages CUDA tensors
/// through the host).
std::unique_ptr<Communicator> make_gloo_communicator(const RendezvousStore& store, int rank,
                                                     int world_size,
                                                     std::chrono::milliseconds timeout,
                                                     const GlooBinding& binding = {},
                                                     c10::Device device = c10::Device(c10::kCPU));

}  // namespace bertlab
