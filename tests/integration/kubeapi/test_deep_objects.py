"""Objects nested past kubeapi.deepjson's bound, from the real apiserver, through every reader.

The apiserver accepts opaque parameters of any depth that fits their 10 KiB limit: it has
no depth limit of its own. Whatever the client (the light one with orjson, the full one
with json) and whatever the read (GET, a LIST page, a watch event through an informer),
drakit gets the object with at most MAX_DEPTH levels of plain containers and the rest as a
DeepJSON leaf at the same field, and writes it back byte for byte.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from helpers.deepshapes import CLAIM_LEVEL, SHAPES, nested_lists, plain_depth
from helpers.rawclaims import create_raw_claim, raw_claim_text

from drakit.kubeapi.deepjson import MAX_DEPTH, DeepJSON, depth_problem
from drakit.kubeapi.errors import Invalid, NotFound
from drakit.kubeapi.informer import Informer
from drakit.kubeapi.lightclient import LightApiClient, load_light_client
from drakit.kubeapi.resources import RESOURCE_CLAIMS, Resource
from drakit.localcluster import LocalCluster

pytestmark = pytest.mark.integration

#: The apiserver's limit on opaque parameters (resource.OpaqueParametersMaxLength).
PARAMETERS_MAX_BYTES = 10 * 1024


@pytest.fixture
def light(cluster: LocalCluster) -> Iterator[LightApiClient]:
    client = load_light_client(cluster.kubeconfig, qps=0, fast_json=True)
    yield client
    client.close()


@pytest.fixture
def deep_claims(light: LightApiClient, namespace: str) -> Iterator[list[str]]:
    """Names of the claims a test made; deleted afterwards (no namespace controller runs)."""
    names: list[str] = []
    yield names
    claims = Resource(light, RESOURCE_CLAIMS)
    for name in names:
        with contextlib.suppress(NotFound):
            claims.delete(name, namespace)


def test_the_apiserver_limits_parameters_by_size_only_not_by_depth(
    light: LightApiClient, namespace: str, deep_claims: list[str]
) -> None:
    # The deepest parameters that fit: arrays 5,118 levels, 10,240 bytes.
    deepest = nested_lists(PARAMETERS_MAX_BYTES // 2 - 2)
    assert len(deepest) == PARAMETERS_MAX_BYTES
    deep_claims.append("deepest")
    create_raw_claim(light, namespace, "deepest", "d.example.com", device_class="x",
                     parameters=deepest)  # fmt: skip
    one_more = nested_lists(PARAMETERS_MAX_BYTES // 2 - 1)
    with pytest.raises(Invalid, match=r"must not be larger than|Too long|10240"):
        create_raw_claim(light, namespace, "too-big", "d.example.com", device_class="x",
                         parameters=one_more)  # fmt: skip


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_every_reader_gets_a_deep_claim_within_the_bound_with_the_deep_part_at_the_same_field(
    *,
    api: Any,
    light: LightApiClient,
    namespace: str,
    deep_claims: list[str],
    eventually: Any,
    shape: str,
) -> None:
    _depth, parameters = SHAPES[shape]
    name = f"deep-{uuid.uuid4().hex[:6]}"
    deep_claims.append(name)
    create_raw_claim(light, namespace, name, "d.example.com", device_class="x",
                     parameters=parameters(CLAIM_LEVEL))  # fmt: skip
    expected = depth_problem(Resource(light, RESOURCE_CLAIMS).get(name, namespace))
    assert expected is not None and expected.startswith("spec.devices.config[0].opaque.parameters")

    reads: dict[str, Any] = {}
    for client_name, client in (("light+orjson", light), ("full+json", api)):
        claims = Resource(client, RESOURCE_CLAIMS)
        reads[f"{client_name} GET"] = claims.get(name, namespace)
        (listed,) = [c for c in claims.list(namespace).items if c["metadata"]["name"] == name]
        reads[f"{client_name} LIST"] = listed
        informer = Informer(claims, namespace=namespace)
        informer.start()
        try:
            reads[f"{client_name} watch"] = eventually(
                lambda informer=informer: informer.store.get(f"{namespace}/{name}"),
                what="the claim in the informer",
            )
        finally:
            informer.stop()
    for read, claim in reads.items():
        assert plain_depth(claim) <= MAX_DEPTH, read
        assert depth_problem(claim) == expected, read


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_a_deep_claim_read_and_updated_keeps_its_parameters_byte_for_byte(
    light: LightApiClient, namespace: str, deep_claims: list[str], shape: str
) -> None:
    # The apiserver refuses a spec whose parameters bytes changed ("field is immutable").
    _depth, parameters = SHAPES[shape]
    text = parameters(CLAIM_LEVEL)
    deep_claims.append("c")
    create_raw_claim(light, namespace, "c", "d.example.com", device_class="x", parameters=text)
    claims = Resource(light, RESOURCE_CLAIMS)
    claim = claims.get("c", namespace)
    leaf = claim["spec"]["devices"]["config"][0]["opaque"]["parameters"]
    while not isinstance(leaf, DeepJSON):
        leaf = next(iter(leaf.values())) if isinstance(leaf, dict) else leaf[0]
    claim["metadata"]["labels"] = {"touched": "yes"}
    updated = claims.update(claim)
    assert updated["metadata"]["labels"] == {"touched": "yes"}
    assert text in raw_claim_text(light, namespace, "c")
