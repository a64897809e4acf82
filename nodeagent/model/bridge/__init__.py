"""The eviction bridge (issue 28; DESIGN 1, "Legacy drains"), pure: a validating admission
webhook on ``pods/eviction`` turns the eviction of a pod with interceptors into an
EvictionRequest and answers 429 until the request's turn reaches the imperative eviction.

- :mod:`.decision`: the answer to one eviction, and what to write first;
- :mod:`.writes`: those writes, and the EvictionRequest the bridge asks with;
- :mod:`.review`: the ``admission.k8s.io/v1`` AdmissionReview read and answered.

The shell (:mod:`nodeagent.bridge`) serves it over HTTPS from the informers' caches.
"""
