"""The upstream EvictionRequest API (`lifecycle.k8s.io/v1alpha1`, KEP-4563 as Kubernetes v1.37
serves it) decided as pure functions: which responders a pod's Eviction has and in which order
(:mod:`.responders`), and how an Eviction moves on from its requests, its pod and the clock
(:mod:`.eviction`). v1.37 serves the API with no controller behind it; nodeagent's leader is
that controller (`controllers.lifecycle`)."""
