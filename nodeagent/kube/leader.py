"""Leader election on a coordination.k8s.io/v1 Lease, as client-go's `leaderelection` does it.

- Acquire when the Lease is absent, free (empty holder), ours, or expired. Expiry is judged by
  our own clock: a Lease counts as expired when it has not changed for its
  leaseDurationSeconds since we first saw it in its current state, so clock skew between
  nodes does not matter.
- Every write carries the resourceVersion we read: a 409 Conflict means another candidate
  wrote first, and we lost that round.
- The leader renews every retry period. When it has not managed to renew for renew_deadline
  (shorter than the lease duration, so nobody else can have taken over yet) it stops leading.
- On a graceful stop the leader releases the Lease (empty holder, 1 s duration) so a
  successor takes over at its next retry instead of waiting out the lease.
- A Lease namespace that does not exist is an operator's to fix: one error says how, then the
  candidate retries quietly with backoff and leads once the namespace is there
  (model.leader.missing_namespace_step decides).
"""

from __future__ import annotations

import asyncio
import logging
import math
import random
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Protocol

from nodeagent.kube.errors import AlreadyExists, Conflict, KubeError, NotFound
from nodeagent.kube.protocols import Creator, Getter, Replacer
from nodeagent.kube.resources import LEASES, Obj, format_micro_time
from nodeagent.model.bodies import mapping
from nodeagent.model.leader import (
    JITTER,
    MissingNamespace,
    Say,
    is_missing_namespace,
    missing_namespace_message,
    missing_namespace_step,
)

__all__ = ["LeaderElector", "LeaseClient"]

log = logging.getLogger(__name__)


class LeaseClient(Getter, Creator, Replacer, Protocol):
    """The part of `KubeClient` leader election needs."""


class LeaderElector:
    def __init__(
        self,
        client: LeaseClient,
        namespace: str,
        name: str,
        identity: str,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
    ) -> None:
        if not identity:
            raise ValueError("identity must not be empty")
        if not lease_duration > renew_deadline > retry_period * JITTER or retry_period <= 0:
            raise ValueError(f"need lease_duration > renew_deadline > {JITTER} * retry_period > 0")
        self._client = client
        self._namespace = namespace
        self._name = name
        self.identity = identity
        self._lease_seconds = max(1, math.ceil(lease_duration))
        self._renew_deadline = renew_deadline
        self._retry_period = retry_period
        self._rng = random.Random()
        self._is_leader = False
        self._lease: Obj | None = None  # the Lease as we last read or wrote it
        self._observed_spec: Obj | None = None
        self._observed_at = 0.0  # loop time the Lease last changed, as far as we saw
        self._renewed_at = 0.0  # loop time our last successful write started

    @property
    def is_leader(self) -> bool:
        return self._is_leader

    @property
    def holder(self) -> str:
        """The holder as last observed ("" when free or unknown)."""
        return str(mapping(self._lease, "spec").get("holderIdentity") or "")

    async def run(self, lead: Callable[[], Awaitable[None]]) -> None:
        """Campaign, run `lead()` while leading, cancel it when leadership is lost, campaign again.

        Returns after `lead()` returns; re-raises what `lead()` raises. Either way, and when
        cancelled, a Lease we still hold is released.
        """
        try:
            while True:
                await self._acquire()
                if await self._lead(lead):
                    return
        finally:
            await self._release()

    async def _acquire(self) -> None:
        loop = asyncio.get_running_loop()
        missing = MissingNamespace()
        while True:
            delay = self._retry_period
            try:
                acquired = await self._try_acquire_or_renew()
            except KubeError as exc:
                if not is_missing_namespace(exc.status, exc.details, self._namespace):
                    log.warning("cannot acquire lease %s/%s: %s", self._namespace, self._name, exc)
                else:
                    missing, say, delay = missing_namespace_step(
                        missing, True, loop.time(), self._retry_period
                    )
                    self._say(say, delay)
            else:
                # an answer about the Lease: its namespace is there
                missing, say, delay = missing_namespace_step(
                    missing, False, loop.time(), self._retry_period
                )
                self._say(say, delay)
                if acquired:
                    log.info(
                        "%s became leader of lease %s/%s",
                        self.identity,
                        self._namespace,
                        self._name,
                    )
                    return
            await asyncio.sleep(delay * (1.0 + (JITTER - 1.0) * self._rng.random()))

    def _say(self, say: Say, delay: float) -> None:
        if say is Say.ERROR:
            log.error("%s", missing_namespace_message(self._namespace))
        elif say is Say.REMINDER:
            log.warning("still waiting: %s", missing_namespace_message(self._namespace))
        elif say is Say.QUIET:
            log.debug("namespace %r still missing; next attempt in %.1fs", self._namespace, delay)
        elif say is Say.FOUND:
            log.info("the leader election namespace %r exists now", self._namespace)

    async def _lead(self, lead: Callable[[], Awaitable[None]]) -> bool:
        """Lead until `lead` finishes (True) or leadership is lost (False)."""
        self._is_leader = True

        async def leading() -> None:
            await lead()

        lead_task = asyncio.create_task(leading(), name="leader " + self.identity)
        renew_task = asyncio.create_task(self._keep_renewing(), name="renew " + self._name)
        try:
            done, _ = await asyncio.wait(
                {lead_task, renew_task}, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            # Stop leading before anything else: from here on another candidate may win.
            lead_task.cancel()
            renew_task.cancel()
            await asyncio.gather(lead_task, renew_task, return_exceptions=True)
            self._is_leader = False
        if lead_task in done:
            lead_task.result()  # re-raises what `lead` raised
            return True
        # Judged by the renew task, not by how `lead` ended: it may swallow its cancellation.
        renew_task.result()  # re-raises a bug in renewing rather than hiding it as a loss
        log.warning(
            "%s lost the lease %s/%s; stopped leading", self.identity, self._namespace, self._name
        )
        return False

    async def _keep_renewing(self) -> None:
        """Renew every retry period; return when renewing failed for the renew deadline."""
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(self._retry_period)
            deadline = self._renewed_at + self._renew_deadline
            while True:
                remaining = deadline - loop.time()
                if remaining <= 0:
                    log.warning(
                        "%s could not renew lease %s/%s within %.1fs",
                        self.identity,
                        self._namespace,
                        self._name,
                        self._renew_deadline,
                    )
                    return
                try:
                    # asyncio.timeout, not wait_for: on 3.11 wait_for can return the result of a
                    # renewal that finished as a cancel came in, losing the cancel
                    async with asyncio.timeout(remaining):
                        renewed = await self._try_acquire_or_renew()
                except (KubeError, TimeoutError) as exc:
                    log.warning("renewing lease %s/%s failed: %s", self._namespace, self._name, exc)
                    renewed = False
                if renewed:
                    break
                if self.holder not in ("", self.identity):
                    log.warning(
                        "lease %s/%s was taken by %s", self._namespace, self._name, self.holder
                    )
                    return
                await asyncio.sleep(min(self._retry_period, max(0.0, deadline - loop.time())))

    async def _try_acquire_or_renew(self) -> bool:
        loop = asyncio.get_running_loop()
        started = loop.time()
        now = format_micro_time(datetime.now(UTC))
        if self._is_leader and self._lease is not None and self.holder == self.identity:
            # Fast path: renew the Lease we wrote last; a Conflict means it changed, so look.
            try:
                self._store(await self._client.replace(LEASES, self._renewed(self._lease, now)))
            except Conflict:
                pass
            else:
                self._renewed_at = started
                return True
        try:
            lease = await self._client.get(LEASES, self._name, self._namespace)
        except NotFound:
            try:
                created = await self._client.create(LEASES, self._new_lease(now))
            except (AlreadyExists, Conflict):
                return False
            self._store(created)
            self._renewed_at = started
            return True
        self._store(lease)
        holder = mapping(lease, "spec").get("holderIdentity") or ""
        if holder and holder != self.identity and not self._expired(loop.time()):
            return False
        try:
            self._store(await self._client.replace(LEASES, self._renewed(lease, now)))
        except Conflict:
            return False
        self._renewed_at = started
        return True

    def _new_lease(self, now: str) -> Obj:
        return {
            "apiVersion": LEASES.api_version,
            "kind": LEASES.kind,
            "metadata": {"name": self._name, "namespace": self._namespace},
            "spec": {
                "holderIdentity": self.identity,
                "leaseDurationSeconds": self._lease_seconds,
                "acquireTime": now,
                "renewTime": now,
                "leaseTransitions": 0,
            },
        }

    def _renewed(self, lease: Obj, now: str) -> Obj:
        """`lease` held by us and renewed at `now`; keeps its resourceVersion for the CAS."""
        old = mapping(lease, "spec")
        spec = dict(old)
        spec["holderIdentity"] = self.identity
        spec["leaseDurationSeconds"] = self._lease_seconds
        spec["renewTime"] = now
        if old.get("holderIdentity") != self.identity:
            spec["acquireTime"] = now
            spec["leaseTransitions"] = int(old.get("leaseTransitions") or 0) + 1
        return {**lease, "spec": spec}

    def _store(self, lease: Obj) -> None:
        self._lease = lease
        spec = mapping(lease, "spec")
        if spec != self._observed_spec:
            self._observed_spec = dict(spec)
            self._observed_at = asyncio.get_running_loop().time()

    def _expired(self, now: float) -> bool:
        duration = mapping(self._lease, "spec").get("leaseDurationSeconds")
        seconds = (
            duration if isinstance(duration, int | float) and duration > 0 else self._lease_seconds
        )
        return now >= self._observed_at + seconds

    async def _release(self) -> None:
        """Give the Lease up if we hold it, so a successor need not wait for it to expire."""
        lease = self._lease
        if lease is None or self.holder != self.identity:
            return
        now = format_micro_time(datetime.now(UTC))
        spec = dict(mapping(lease, "spec"))
        spec.update(holderIdentity="", leaseDurationSeconds=1, renewTime=now, acquireTime=now)
        try:
            async with asyncio.timeout(self._renew_deadline):
                released = await self._client.replace(LEASES, {**lease, "spec": spec})
        except Conflict:
            log.info(
                "lease %s/%s changed before release; not ours to release",
                self._namespace,
                self._name,
            )
        except (KubeError, TimeoutError) as exc:
            log.warning(
                "releasing lease %s/%s failed; successor waits for expiry: %s",
                self._namespace,
                self._name,
                exc,
            )
        except Exception:
            # Runs in `finally` of run(): must not replace the error or cancellation in flight.
            log.exception("releasing lease %s/%s failed", self._namespace, self._name)
        else:
            self._store(released)
            log.info("%s released lease %s/%s", self.identity, self._namespace, self._name)
