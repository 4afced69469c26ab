"""``drakit webhook``: admission of opaque device config, for any drakit driver.

A validating admission webhook for ResourceClaims and ResourceClaimTemplates
(``resource.k8s.io`` v1, v1beta2, v1beta1): every ``spec.devices.config[]`` entry whose
``opaque.driver`` is the driver's name is validated with the backend's ``config_model``
exactly as the node plugin validates it at prepare
(:func:`drakit.node_plugin.config.validate_parameters`), so a bad config is refused when
the claim is written instead of when a pod using it starts.

- :mod:`.review`: the decision, pure (an AdmissionReview in, its answer out).
- :mod:`.certs`: the webhook's own CA and serving certificate.
- :mod:`.castate`: the CA state (served, staged, previous) and its Secret encoding.
- :mod:`.castore`: where that state lives: a Secret shared by replicas, or memory.
- :mod:`.cabundle`: writing the CA bundle into the ValidatingWebhookConfiguration.
- :mod:`.rotation`: publish, stage, promote and serve, from any number of replicas.
- :mod:`.server`: the HTTPS endpoint (bounded bodies, timeouts, hot-swapped certificate).
- :mod:`.jsonbudget`: what decoding a body would cost, read from its bytes before decoding.
- :mod:`.main`: the program: wires the server, the store and the rotation.
"""
