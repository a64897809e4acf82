"""nodeagent's test bed, a distribution of its own (nodeagent-testbed, in testbed/) that the node
agent's package never carries nor imports:

- `sim`: the simulated Kubernetes cluster (API server, kubelets, workload controllers, faults)
- `fakelogind`: a simulated systemd-logind on a private dbus-daemon
- `demo`: `nodeagent demo`, a reboot of one node of a simulated cluster
- `cli`: the `nodeagent demo` and `nodeagent sim` subcommands (entry-point group
  `nodeagent.commands`)
"""
