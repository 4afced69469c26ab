"""A create refused because the namespace is being deleted is recognised as such."""

from __future__ import annotations

from drakit.kubeapi.errors import Forbidden, error_from_status, namespace_terminating


def _status(reason: str) -> dict[str, object]:
    return {
        "kind": "Status",
        "status": "Failure",
        "message": 'resourceclaims "x" is forbidden: unable to create new content in namespace '
        "t because it is being terminated",
        "reason": "Forbidden",
        "details": {"name": "x", "kind": "resourceclaims", "causes": [{"reason": reason}]},
        "code": 403,
    }


def test_forbidden_create_in_a_terminating_namespace_is_recognised() -> None:
    err = error_from_status(403, _status("NamespaceTerminating"))
    assert isinstance(err, Forbidden)
    assert namespace_terminating(err)


def test_other_forbidden_errors_are_not_mistaken_for_it() -> None:
    assert not namespace_terminating(error_from_status(403, _status("SomethingElse")))
    assert not namespace_terminating(error_from_status(403, {"message": "denied", "code": 403}))
