"""Checks on the claim references the kubelet sends over the DRA socket.

Whoever can reach the socket chooses namespace, name and UID freely. They
end up in API URLs (``GET .../namespaces/<ns>/resourceclaims/<name>``), in
file names (``k8s.<driver>-claim_<uid>.json``) and in Events, so each is
checked here, before any request is sent or any path is built:

* the namespace must be a DNS label (what the apiserver accepts for namespaces);
* the name must be a DNS subdomain (what it accepts for ResourceClaim names);
* the UID must look like a UUID (the apiserver only ever generates those).

A reference that fails gets its own error; the other claims of the call go on.
"""

from __future__ import annotations

import re

from drakit.plugin.claims import ClaimRef

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


def claim_ref_problem(ref: ClaimRef) -> str:
    """Why ``ref`` cannot be used (names the field and the reason), or "" when it can."""
    if not (len(ref.namespace) <= DNS_LABEL_MAX and _DNS_LABEL.fullmatch(ref.namespace)):
        return (
            f"claim namespace {shown(ref.namespace)} is not a DNS label "
            f"(at most {DNS_LABEL_MAX} of a-z, 0-9 and '-', starting and ending alphanumeric)"
        )
    if not (len(ref.name) <= DNS_SUBDOMAIN_MAX and _DNS_SUBDOMAIN.fullmatch(ref.name)):
        return (
            f"claim name {shown(ref.name)} is not a DNS subdomain "
            f"(at most {DNS_SUBDOMAIN_MAX} of a-z, 0-9, '-' and '.', labels starting and "
            "ending alphanumeric)"
        )
    if not is_claim_uid(ref.uid):
        return f"claim uid {shown(ref.uid)} is not a UUID"
    return ""
