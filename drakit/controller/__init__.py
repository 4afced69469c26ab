"""The drakit companion controller: claim generation, claim lifecycle, allocation and binding.

Modules, one concept each:

- ``config``: settings and the ``--claim-generation`` scope;
- ``naming``: names, references and predicates shared by the rest (pure);
- ``caches``: informers, the claim assume cache, indexes, the record of created claims;
- ``claimgen``: ResourceClaims from templates, exactly one per pod claim;
- ``lifecycle``: reservations of finished pods, deallocation, finalizer, deletion;
- ``claimwrites``: the claim writes and their preconditions (the finalizer ``test``);
- ``nodefilter``: readiness, taints, selector and affinity;
- ``devicebook``: allocated state = assume cache + allocations in flight, under one lock;
- ``scheduler``: decide (node + allocation), write, assume, bind;
- ``explanation``: the allocator's explanations summed into the unschedulable message;
- ``waiting``: which event wakes which unschedulable pod;
- ``metrics``, ``logs``: Prometheus metrics and structured logs;
- ``app``: wiring (handlers, one work queue, workers); ``leader``: run only while leading;
- ``bindingcheck``: the public binding-conditions hook (``drakit.plugin.BindingCheck``);
- ``bindingconditions``: ``drakit driver-controller``, which writes a driver's binding
  conditions into claims' ``status.devices``.
"""
