"""What the static-pod interceptor (``kubelet.k8s.io``, DESIGN section 5) decides and the values
it keeps, pure: `manifests` (a manifest as the kubelet reads it, and its mirror pod's name),
`journal` (the stash's entry format), `outcomes` (what a move reports), `policy` (what the
interceptor decides of a request), `plan` (the moves for one pass). The files, the stash and the
interceptor itself are :mod:`nodeagent.node.staticpods`."""
