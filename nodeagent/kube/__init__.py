"""Kubernetes access layer: the only package that imports `kubernetes`.

Modules: `client` (async facade on dicts), `errors` (translation of every client failure),
`resources`, `store`, `informer`, `workqueue`, `ratelimit`, `leader`, `events`; `official`
imports only the modules of the official client that these use, before any of them does.
"""

from nodeagent.kube import official

official.install()
