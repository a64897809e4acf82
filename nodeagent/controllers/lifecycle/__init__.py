"""nodeagent as the controller and the imperative evictor of the upstream EvictionRequest API
(`lifecycle.k8s.io/v1alpha1`), which Kubernetes v1.37 serves with no controller behind it."""
