"""EvictionRequest interceptors (KEP-4563, DESIGN 2.2 and 2.3): which interceptors a pod has,
whose turn it is, and the EvictionRequest status they write.

Pure: plain JSON-shaped dicts in, frozen dataclasses out; time comes in as ``now``. The
controllers in :mod:`nodeagent.controllers.evictionrequest` and
:mod:`nodeagent.controllers.interceptors` read and apply what these modules decide.

The pod-side stand-in for the KEP's ``pod.spec.evictionInterceptors`` is the annotation
``nodeagent.io/eviction-interceptors`` (a comma-separated, ordered list). Without it, defaults
apply: mirror pods get ``kubelet.k8s.io``, DaemonSet pods ``daemonset.apps.k8s.io``, and pods
matched by a configured annotate-and-wait interceptor that interceptor (configured ones first, in
configuration order). ``imperative-eviction.k8s.io`` always comes last.

One module per concern:

- :mod:`.targets`: interceptor names and the ordered list a pod has;
- :mod:`.status`: one ``status.interceptors[]`` entry;
- :mod:`.requests`: what the controllers read of an EvictionRequest;
- :mod:`.turns`: whose turn it is, and when the active interceptor is passed over;
- :mod:`.heartbeats`: how often an interceptor of ours reports;
- :mod:`.imperative`: the imperative eviction's backoff and refusal messages.
- :mod:`.plans`: the cluster-side interceptors' (DaemonSet, annotate-and-wait) decisions.
"""
