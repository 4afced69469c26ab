"""Building a claim from a template: copies, never changes the (shared, cached) template."""

from __future__ import annotations

import copy

from drakit.controller.claimgen import claim_from_template
from drakit.controller.naming import POD_CLAIM_NAME_ANNOTATION


def test_claim_from_template_copies_metadata_and_spec_without_changing_the_template():
    template = {
        "metadata": {"name": "t", "namespace": "ns"},
        "spec": {
            "metadata": {"labels": {"a": "1"}, "annotations": {"b": "2"}},
            "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "c"}}]}},
        },
    }
    before = copy.deepcopy(template)
    pod = {"metadata": {"name": "p", "namespace": "ns", "uid": "u1"}}
    claim = claim_from_template(pod, "gpu", template)
    assert template == before
    assert claim["metadata"]["generateName"] == "p-gpu-"
    assert claim["metadata"]["labels"] == {"a": "1"}
    assert claim["metadata"]["annotations"] == {"b": "2", POD_CLAIM_NAME_ANNOTATION: "gpu"}
    assert claim["metadata"]["ownerReferences"] == [
        {"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "u1", "controller": True}
    ]
    claim["spec"]["devices"]["requests"][0]["name"] = "changed"
    claim["metadata"]["labels"]["a"] = "changed"
    assert template == before
