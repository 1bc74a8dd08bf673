#pragma once
// Which of this machine's addresses a rank's Gloo sockets bind to. The peers connect to that
// address, so it must be one of this machine's that the other machines reach; MASTER_ADDR is
// rank 0's machine and is only right for rank 0's own.

#include <string>
#include <vector>

namespace bertlab {

/// Named interfaces (GLOO_SOCKET_IFNAME) or one address of this machine.
struct GlooBinding {
  std::vector<std::string> interfaces;  ///< GLOO_SOCKET_IFNAME's interfaces; empty: `address`
  std::string address = "127.0.0.1";    ///< an address (or host name) of this machine
  std::string interface;                ///< the interface that holds `address`, when known
  std::string reason = "ranks on this machine";  ///< why this binding, for the log line

  /// "198.18.0.2 (interface veth1; ...)" or "interfaces eth1, eth2 (GLOO_SOCKET_IFNAME)".
  std::string describe() const;
};

/// As PyTorch chooses: GLOO_SOCKET_IFNAME when set (comma-separated interface names, each
/// checked to exist); else the address of this machine from which the kernel routes to
/// `master_addr` (loopback when rank 0 is on this machine); else, when there is no route, the
/// address of this machine's host name. Throws ConfigError for an interface that does not exist.
GlooBinding choose_gloo_binding(const std::string& master_addr);

}  // namespace bertlab
