"""drakit.webhook.rotation.Rotator with real certificates, a fake clock and an in-memory
configuration: the CA outlives a restart, replicas share it without fighting over the
bundle, a rotation is trusted before it is served, and API trouble does not take readiness
away. (The same against the real apiserver: tests/integration/webhook.)"""

from __future__ import annotations

import time

import pytest

from drakit.kubeapi.errors import ApiUnavailable
from drakit.webhook.cabundle import Publication
from drakit.webhook.castate import CAState
from drakit.webhook.castore import MemoryStore, Stored
from drakit.webhook.certs import Issued, issue, split_bundle
from drakit.webhook.rotation import Rotator, TrustClock

LIFETIME = 3000.0
PROPAGATION = 5.0
RESYNC = 10.0


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Configuration:
    """The ValidatingWebhookConfiguration's bundle and resourceVersion."""

    def __init__(self) -> None:
        self.bundle = b""
        self.version = 1
        self.writes = 0
        self.down = False

    def publish(self, bundle: bytes) -> Publication:
        if self.down:
            raise ApiUnavailable("connection refused")
        read = str(self.version)
        if bundle != self.bundle:
            self.overwrite(bundle)
            self.writes += 1
        return Publication(read, str(self.version))

    def overwrite(self, bundle: bytes) -> None:
        self.bundle = bundle
        self.version += 1


class RequestableStore(MemoryStore):
    """A MemoryStore whose user can set the rotate annotation."""

    request = ""

    def load(self) -> Stored | None:
        stored = super().load()
        if stored is None:
            return None
        return Stored(stored.state, stored.version, self.request)


@pytest.fixture
def clock() -> Clock:
    clock = Clock()
    clock.now = float(int(time.time()))  # certificate times have whole seconds
    return clock


def replica(
    store: MemoryStore, config: Configuration, clock: Clock, served: list[Issued] | None = None
) -> Rotator:
    log = served if served is not None else []
    return Rotator(
        store=store,
        issue_certs=lambda: issue(("127.0.0.1",), LIFETIME, name="t", at=clock.now),
        publish=config.publish,
        serve=log.append,
        resync=RESYNC,
        propagation=PROPAGATION,
        clock=clock,
    )


def run(rotators: list[Rotator], clock: Clock, seconds: float, tick: float = 1.0) -> None:
    end = clock.now + seconds
    while clock.now < end:
        for rotator in rotators:
            while rotator.step() <= 0.05:  # a state just written is published at once
                pass
        clock.now += tick


def cas(bundle: bytes) -> list[bytes]:
    return split_bundle(bundle)


def test_a_restarted_webhook_serves_the_certificate_the_apiserver_already_trusts(
    clock: Clock,
) -> None:
    store, config = MemoryStore(), Configuration()
    first = replica(store, config, clock)
    run([first], clock, 10)
    assert first.ready.is_set()
    published, writes = config.bundle, config.writes

    served: list[Issued] = []
    restarted = replica(store, config, clock, served)
    run([restarted], clock, 10)
    assert [s.cert_pem for s in served] == [first.served.cert_pem]  # type: ignore[union-attr]
    assert config.bundle == published and config.writes == writes  # nothing republished
    assert restarted.ready.is_set()


def test_readiness_waits_until_the_apiserver_has_had_the_ca_for_the_propagation_time(
    clock: Clock,
) -> None:
    rotator = replica(MemoryStore(), Configuration(), clock)
    assert rotator.step() == PROPAGATION  # published, served, not yet trusted
    assert not rotator.ready.is_set()
    clock.now += PROPAGATION
    rotator.step()
    assert rotator.ready.is_set()


def test_replicas_share_one_certificate_and_do_not_fight_over_the_bundle(clock: Clock) -> None:
    store, config = MemoryStore(), Configuration()
    replicas = [replica(store, config, clock) for _ in range(3)]
    run(replicas, clock, LIFETIME * 2, tick=2.5)  # three rotations
    served = {r.served.cert_pem for r in replicas}  # type: ignore[union-attr]
    assert len(served) == 1
    # One write per bundle change: the first CA, each staged CA and each expiry at most.
    assert config.writes <= 1 + 3 * 2, config.writes


def test_a_rotation_is_published_beside_the_old_ca_before_it_is_served(clock: Clock) -> None:
    store, config = MemoryStore(), Configuration()
    served: list[Issued] = []
    rotator = replica(store, config, clock, served)
    run([rotator], clock, 10)
    old = served[-1]
    clock.now = old.renew_at
    run([rotator], clock, 1)
    state = store.load().state  # type: ignore[union-attr]
    assert state is not None and state.next is not None
    assert cas(config.bundle) == [state.next.ca_pem, old.ca_pem]  # trusted, newest first
    assert served[-1] is old  # not served yet
    run([rotator], clock, PROPAGATION + 1)
    new = served[-1]
    assert new.cert_pem == state.next.cert_pem
    assert cas(config.bundle) == [new.ca_pem, old.ca_pem]  # the old CA stays trusted
    assert rotator.ready.is_set()


def test_a_replica_on_the_old_certificate_stays_trusted_until_it_switches(clock: Clock) -> None:
    store, config = MemoryStore(), Configuration()
    fast, slow_served = replica(store, config, clock), []
    slow = replica(store, config, clock, slow_served)
    run([fast, slow], clock, 10)
    clock.now = fast.served.renew_at  # type: ignore[union-attr]
    run([fast], clock, PROPAGATION + 2)  # the fast replica stages and promotes alone
    assert fast.served is not None and fast.served.cert_pem != slow_served[-1].cert_pem
    assert slow_served[-1].ca_pem in cas(config.bundle)
    run([fast, slow], clock, PROPAGATION + 2)
    assert slow.served is not None and slow.served.cert_pem == fast.served.cert_pem


def test_a_user_request_rotates_once_with_the_same_overlap(clock: Clock) -> None:
    store, config = RequestableStore(), Configuration()
    rotator = replica(store, config, clock)
    run([rotator], clock, 10)
    first = rotator.served
    store.request = "2024-06-01"
    run([rotator], clock, 1)
    assert len(cas(config.bundle)) == 2 and rotator.served is first
    run([rotator], clock, PROPAGATION + 1)
    second = rotator.served
    assert second is not None and first is not None and second.ca_pem != first.ca_pem
    run([rotator], clock, 60)
    assert rotator.served is second  # answered once, not on every step


def test_deleting_the_state_revokes_the_old_ca_at_once(clock: Clock) -> None:
    store, config = MemoryStore(), Configuration()
    served: list[Issued] = []
    rotator = replica(store, config, clock, served)
    run([rotator], clock, 10)
    old = served[-1]
    store._stored = None  # what `kubectl delete secret` does to a SecretStore
    run([rotator], clock, 1)
    assert old.ca_pem not in cas(config.bundle)
    assert served[-1].ca_pem == cas(config.bundle)[0]  # served without waiting: old is dead


def test_an_unusable_state_is_replaced_by_a_new_ca(clock: Clock) -> None:
    store, config = MemoryStore(), Configuration()
    store._stored = Stored(None, "7", problem="data.tls.key: missing")
    rotator = replica(store, config, clock)
    run([rotator], clock, PROPAGATION + 1)
    assert rotator.ready.is_set()
    stored = store.load()
    assert stored is not None and stored.state is not None


def test_api_trouble_backs_off_and_keeps_a_trusted_replica_ready(clock: Clock) -> None:
    store, config = MemoryStore(), Configuration()
    rotator = replica(store, config, clock)
    run([rotator], clock, 10)
    assert rotator.ready.is_set()
    config.down = True
    assert [rotator.step() for _ in range(3)] == [1.0, 2.0, 4.0]
    assert rotator.ready.is_set()
    clock.now = rotator.served.not_after  # type: ignore[union-attr]
    rotator.step()
    assert not rotator.ready.is_set()  # an expired certificate is never ready


def test_trust_restarts_when_someone_else_wrote_the_configuration(clock: Clock) -> None:
    trust = TrustClock(PROPAGATION)
    trust.observe(Publication("1", "2"), [b"A"], now=0.0)
    trust.observe(Publication("2", "2"), [b"A"], now=10.0)
    assert trust.trusted(b"A", 10.0)
    trust.observe(Publication("3", "4"), [b"A", b"B"], now=11.0)  # "2" -> "3" was not us
    assert not trust.trusted(b"A", 11.0) and trust.wait(b"B", 11.0) == PROPAGATION
    assert trust.wait(b"C", 11.0) is None


def test_the_bundle_order_does_not_depend_on_which_side_of_a_promotion_one_reads(
    clock: Clock,
) -> None:
    a, b = (issue(("127.0.0.1",), LIFETIME, name=n, at=clock.now) for n in "ab")
    staged = CAState(current=a).staged(b, clock.now, "")
    assert staged.bundle(clock.now) == staged.promoted().bundle(clock.now)
