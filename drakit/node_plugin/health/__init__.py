"""The device-health policy: which taint an unhealthy device gets, and when.

* :mod:`.policy`: the operator's settings (taint effect per health reason, dwell times and
  flap window) and their parsing from ``drakit node-plugin`` flags.
* :mod:`.hysteresis`: per-device state machine over health reports, timed in seconds, with
  recovery back-off for flapping devices.
* :mod:`.engine`: all of it together, with an Event and metrics on every change of a
  device's effect; the ResourceSlice publisher asks it which taint each device carries.

A node plugin never puts NoExecute on a device: it requests it, and the controller's
NoExecute budget (drakit.controller.noexecute) grants it with a DeviceTaintRule.
"""
