"""Kubernetes API access for drakit: the only package that talks to the API server.

Objects are plain JSON dicts (``objects.KubeObject``) exactly as the apiserver sent them, never
the Python client's generated models, which drop fields newer than the client.

Modules, from the bottom up:

- ``client``: ``load_client(kubeconfig)`` from a kubeconfig or the pod's service account, with
  a client-side QPS/burst limit.
- ``errors``: ``NotFound``, ``Conflict``, ``AlreadyExists``, ``Gone``, ``Invalid``... with the
  apiserver's message and field causes; callers never look at HTTP codes.
- ``resources``: ``Resource(api, RESOURCE_CLAIMS)`` and friends: get, list (selectors,
  pagination), watch (bookmarks), create, update, update_status, patch (merge, JSON, strategic),
  apply (server-side, field manager, force), delete (UID/resourceVersion preconditions),
  ``bind_pod``.
- ``informer``: list+watch with relist on 410 Gone, resync, indexes, ordered handlers.
- ``assume_cache``: an informer's objects plus our own not-yet-seen writes.
- ``workqueue``: per-key queues with rate-limited retries and worker threads.
- ``retry``: ``Backoff``, ``retry_on_conflict``, ``update_with_retry``.
- ``leaderelection``: Lease-based leader election.
- ``events``: an aggregating, rate-limited Event recorder.

A typical controller loop::

    api = load_client(args.kubeconfig)
    claims = Informer(Resource(api, RESOURCE_CLAIMS), resync_period=600)
    queue: WorkQueue[str] = WorkQueue("resource_claim")
    claims.add_handlers(EventHandlers(
        on_add=lambda obj, _initial: queue.add(object_key(obj)),
        on_update=lambda _old, new: queue.add(object_key(new)),
        on_delete=lambda obj: queue.add(object_key(obj)),
    ))
    claims.start()
    claims.wait_for_sync()          # never start workers on an unsynced cache
    queue.start(sync_claim, workers=4)
"""
