"""The eviction request controller's decision (KEP-4563, DESIGN sections 2.2 and 2.3), pure:
`reconcile` (whose turn it is, what the request's status says), `imperative` (the
``imperative-eviction.k8s.io`` interceptor's turn), `plan` (what they return). The shell that
reads and applies it is :mod:`nodeagent.controllers.evictionrequest`."""
