"""Kubernetes access layer: the only package that imports `kubernetes`.

Modules: `client` (async facade on dicts), `errors` (translation of every client failure),
`resources`, `store`, `informer`, `workqueue`, `ratelimit`, `leader`, `events`.
"""
