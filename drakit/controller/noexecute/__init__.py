"""The cluster-wide NoExecute budget, decided by the leader-elected controller alone.

Node plugins put only NoSchedule on their own unhealthy devices and *ask* for NoExecute with
a second taint of effect None (``<driver>/noexecute-request``). The controller grants the
requests within the budget by writing one DeviceTaintRule per granted device; a single
decider has no race. Modules, one concept each:

- ``census``: what a driver's ResourceSlices say (requests, devices per node), pure;
- ``decision``: which requests get a rule and which rules go, pure;
- ``rules``: the DeviceTaintRules (names, content, reading them back), pure;
- ``reconciler``: one reconcile: decide, write through a ``RuleWriter``, count what is in
  flight;
- ``runner``: the controller's part: API version, informer, work queue, Events, metrics.
"""
