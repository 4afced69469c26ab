"""Checks on the claim references the kubelet sends over the DRA socket.

Whoever can reach the socket chooses namespace, name and UID freely. They
end up in API URLs (``GET .../namespaces/<ns>/resourceclaims/<name>``), in
file names (``k8s.<driver>-claim_<uid>.json``) and in Events, so each is
checked here, before any request is sent or any path is built:

* the namespace must be a DNS label (what the apiserver accepts for namespaces);
* the name must be a DNS subdomain (what it accepts for ResourceClaim names);
* the UID must look like a UUID (the apiserver only ever generates those).

A reference that fails gets its own error; the other claims of the call go on.

:func:`label_problem` and :func:`subdomain_problem` are the same checks for the other
strings of a claim that become part of a path (the device metadata files' request folders
and in-container paths: :mod:`drakit.node_plugin.device_metadata`).
"""

from __future__ import annotations

import re

from drakit.node_plugin.driver import ClaimRef

DNS_LABEL_MAX = 63
DNS_SUBDOMAIN_MAX = 253
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
# How much of a rejected value an error message repeats: enough to recognise it,
# never the 10 KB an attacker sent.
_SHOWN = 64


def shown(value: str) -> str:
    """``value`` quoted for a message, cut to a readable length."""
    cut = f" (cut, {len(value)} characters)" if len(value) > _SHOWN else ""
    return repr(value[:_SHOWN]) + cut


def is_claim_uid(uid: str) -> bool:
    """Whether ``uid`` is UUID-shaped and so safe in a file name."""
    return _UUID.fullmatch(uid) is not None


def label_problem(what: str, value: object) -> str:
    """Why ``value`` is no DNS label (RFC 1123: what Kubernetes requires of namespaces,
    request names and the claim names in a pod's spec), or "" when it is one. A label is
    safe as one file name: no '/', no '.', no NUL, at most 63 characters."""
    if isinstance(value, str) and len(value) <= DNS_LABEL_MAX and _DNS_LABEL.fullmatch(value):
        return ""
    return (
        f"{what} {_shown_any(value)} is not a DNS label "
        f"(at most {DNS_LABEL_MAX} of a-z, 0-9 and '-', starting and ending alphanumeric)"
    )


def subdomain_problem(what: str, value: object) -> str:
    """Why ``value`` is no DNS subdomain (RFC 1123: what Kubernetes requires of object names
    such as a ResourceClaim's), or "" when it is one. No '/', no NUL, no '..' (each
    dot-separated label is non-empty), at most 253 characters."""
    if (
        isinstance(value, str)
        and len(value) <= DNS_SUBDOMAIN_MAX
        and _DNS_SUBDOMAIN.fullmatch(value)
    ):
        return ""
    return (
        f"{what} {_shown_any(value)} is not a DNS subdomain "
        f"(at most {DNS_SUBDOMAIN_MAX} of a-z, 0-9, '-' and '.', labels starting and "
        "ending alphanumeric)"
    )


def _shown_any(value: object) -> str:
    return shown(value) if isinstance(value, str) else f"of type {type(value).__name__}"


def claim_ref_problem(ref: ClaimRef) -> str:
    """Why ``ref`` cannot be used (names the field and the reason), or "" when it can."""
    problem = label_problem("claim namespace", ref.namespace)
    problem = problem or subdomain_problem("claim name", ref.name)
    if not problem and not is_claim_uid(ref.uid):
        problem = f"claim uid {shown(ref.uid)} is not a UUID"
    return problem
