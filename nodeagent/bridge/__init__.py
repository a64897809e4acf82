"""The eviction bridge's shell (issue 28): the HTTPS admission webhook every controllers
replica serves from its caches (:mod:`.webhook`), and its certificates (:mod:`.certs`,
:mod:`.certstore`). The decision is :mod:`nodeagent.model.bridge`."""
