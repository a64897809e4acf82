"""Kubernetes access layer: the only package that imports `kubernetes`.

Modules: `client` (async facade on dicts; `connection` loads its configuration,
`requestparts` builds queries and bodies, `watchstream` reads a watch in its thread,
`transport`, `tokenfile`), `errors` (translation of every client failure), `resources`,
`store`, `informer`, `workqueue`, `ratelimit`, `controller`, `expectations`, `discovery`,
`evict`, `leader`, `events`, `cache_transforms` (what the informers keep of a pod);
`official_client` imports only the modules of the official client that these use, before any
of them does.
"""

from nodeagent.kube import official_client

official_client.install()
