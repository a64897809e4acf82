"""A `.deb` agent renews its own short-lived, Node-bound ServiceAccount token.

The kubeconfig's user reads its token from a file (`tokenFile`); the first token is the
admin's (`kubectl create token nodeagent --duration=1h --bound-object-kind Node ...`, README.
Debian). Once it has lived `renew_after` of its life, the agent asks the TokenRequest API, with
that token, for the next one of the same ServiceAccount bound to the same Node, and writes it
atomically over the file; its API client rereads the file when it changes
(`nodeagent.kube.tokenfile`). RBAC (Role nodeagent-node-token) and the admission policy
nodeagent-node-token keep the request to that: this ServiceAccount, its own Node, a day at most.

A refused or hanging request stops nothing: the current token stays in use until it expires,
and the request is tried again with backoff, from 1 s up to 5 min. The file is reread at least
once a minute (as client-go's tokenFile source does), so a token an admin puts there, after the
node was off longer than its token's life, is used and renewed from then on.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Protocol

from nodeagent.kube.client import KubeClient
from nodeagent.kube.errors import KubeError
from nodeagent.kube.tokenfile import TokenFile, write_token
from nodeagent.model.backoff import JitteredBackoff
from nodeagent.model.token_renewal import (
    InvalidToken,
    TokenClaims,
    issued_token,
    read_claims,
    seconds_until_renewal,
    token_request_spec,
    unrenewable,
)

__all__ = ["FileStore", "TokenRenewer", "TokenStore"]

log = logging.getLogger(__name__)

RECHECK = 60.0  # the longest the file goes unread


class TokenStore(Protocol):
    """Where the current token is kept."""

    where: str

    async def read(self) -> str: ...

    async def write(self, token: str) -> None: ...


class FileStore:
    """The kubeconfig's token file, read and written off the event loop."""

    def __init__(self, token_file: TokenFile) -> None:
        self._file = token_file
        self.where = str(token_file.path)

    async def read(self) -> str:
        return await asyncio.to_thread(self._file.read)

    async def write(self, token: str) -> None:
        # a thread cannot be stopped: if we are cancelled meanwhile, the write still ends before
        # we do, so nothing changes the file once the renewer has stopped
        future = asyncio.ensure_future(asyncio.to_thread(write_token, self._file.path, token))
        try:
            await asyncio.shield(future)
        except asyncio.CancelledError:
            with contextlib.suppress(Exception):
                await future
            raise


class TokenRenewer:
    def __init__(
        self,
        client: KubeClient,
        store: TokenStore,
        *,
        expiration: int,
        renew_after: float,
        request_timeout: float,
        backoff: JitteredBackoff | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._client = client
        self._store = store
        self._expiration = expiration
        self._renew_after = renew_after
        self._timeout = request_timeout
        self._backoff = backoff if backoff is not None else JitteredBackoff(base=1.0, cap=300.0)
        self._clock = clock  # wall time: the token's iat and exp are
        self.renewals = 0  # tokens written

    async def run(self) -> None:
        failures = 0
        retry_at: float | None = None
        last: TokenClaims | None = None
        while True:
            claims = await self._current()
            now = self._clock()
            if claims is None:
                await asyncio.sleep(RECHECK)
                continue
            if claims != last:
                why = unrenewable(claims)
                if why is not None:
                    log.info("not renewing the token in %s: %s", self._store.where, why)
                    return
                # a token not seen before (ours, or an admin's): its own schedule
                last, failures, retry_at = claims, 0, None
            due = (
                retry_at
                if retry_at is not None
                else now + seconds_until_renewal(claims, now, self._renew_after)
            )
            if due > now:
                await asyncio.sleep(min(due - now, RECHECK))
                continue
            try:
                await self.renew(claims)
            except (KubeError, TimeoutError, InvalidToken, OSError) as e:
                failures += 1
                delay = self._backoff.delay(failures)
                retry_at = self._clock() + delay
                left = claims.expires_at - self._clock()
                state = (
                    f"the current token expires in {left:.0f}s"
                    if left > 0
                    else "the current token has EXPIRED: give the node a new one (README.Debian)"
                )
                log.warning(
                    "cannot renew the token in %s (attempt %d): %s; %s; next attempt in %.0fs",
                    self._store.where,
                    failures,
                    e,
                    state,
                    delay,
                )

    async def renew(self, claims: TokenClaims) -> TokenClaims:
        """Ask for the next token and put it in the store; its claims."""
        assert claims.namespace is not None and claims.service_account is not None
        spec = token_request_spec(claims, self._expiration)
        async with asyncio.timeout(self._timeout):  # a hanging request counts as a refusal
            response = await self._client.request_token(
                claims.namespace, claims.service_account, spec
            )
        token = issued_token(response, claims, self._clock())
        await self._store.write(token)
        self.renewals += 1
        new = read_claims(token)
        log.info(
            "renewed the token in %s: bound to Node %s, valid until %s",
            self._store.where,
            new.node,
            datetime.fromtimestamp(new.expires_at, UTC).isoformat(timespec="seconds"),
        )
        return new

    async def _current(self) -> TokenClaims | None:
        try:
            return read_claims(await self._store.read())
        except (OSError, InvalidToken) as e:
            log.warning("cannot read the token in %s: %s", self._store.where, e)
            return None
