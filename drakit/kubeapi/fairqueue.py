"""A FIFO that takes turns between tenants, so one tenant's backlog cannot starve the others.

Each key belongs to a tenant (for the controller: the namespace of the object it names).
Keys of one tenant come out in the order they went in; tenants with waiting keys take turns
(round-robin), one key per turn. A tenant that queues a thousand keys therefore delays another
tenant's next key by at most one key per tenant with work waiting, not by a thousand.

Not thread-safe: :class:`drakit.kubeapi.workqueue.WorkQueue` calls it under its own lock.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

__all__ = ["FairQueue", "single_tenant"]

K = TypeVar("K", bound=Hashable)


def single_tenant(_key: object) -> Hashable:
    """Every key in one tenant: a plain FIFO."""
    return None


class FairQueue(Generic[K]):
    """Round-robin between tenants, FIFO within each."""

    def __init__(self, tenant_of: Callable[[K], Hashable] = single_tenant) -> None:
        self._tenant_of = tenant_of
        self._keys: dict[Hashable, deque[K]] = {}  # only tenants with waiting keys
        self._turns: deque[Hashable] = deque()  # those tenants, next turn first
        self._size = 0

    def append(self, key: K) -> None:
        tenant = self._tenant_of(key)
        waiting = self._keys.get(tenant)
        if waiting is None:
            waiting = self._keys[tenant] = deque()
            self._turns.append(tenant)  # a newcomer's turn comes after those already waiting
        waiting.append(key)
        self._size += 1

    def popleft(self) -> K:
        """The oldest key of the tenant whose turn it is; IndexError when empty."""
        if not self._turns:
            raise IndexError("pop from an empty FairQueue")
        tenant = self._turns.popleft()
        waiting = self._keys[tenant]
        key = waiting.popleft()
        if waiting:
            self._turns.append(tenant)
        else:
            del self._keys[tenant]
        self._size -= 1
        return key

    def tenants(self) -> int:
        """Tenants with keys waiting."""
        return len(self._turns)

    def __len__(self) -> int:
        return self._size

    def __bool__(self) -> bool:
        return self._size > 0
