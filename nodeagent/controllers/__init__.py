"""Cluster-side controllers, run by the leader only (DESIGN sections 2 and 3).

`runtime` holds the shared machinery (shared informers, the workqueue-driven `Controller`
base); each controller is a package with a pure `reconcile` module (state in, intended actions
out) and a thin `controller` shell that gathers state from informers and applies the actions.
"""
