"""The device-health policy: which taint an unhealthy device gets, when, and within what budget.

* :mod:`.policy`: the operator's settings (taint effect per health reason, dwell times and
  flap window, NoExecute budget) and their parsing from ``drakit node-plugin`` flags.
* :mod:`.hysteresis`: per-device state machine over health reports, timed in seconds, with
  recovery back-off for flapping devices.
* :mod:`.budget`: which devices may hold a NoExecute taint, node-wide and cluster-wide.
* :mod:`.census`: what the driver's slices count for the budget, bounded against one node.
* :mod:`.clusterview`: the watch cache the budget reads (no API call when deciding).
* :mod:`.engine`: all of it together, with an Event and metrics on every change of a
  device's effect; the ResourceSlice publisher asks it which taint each device carries.
"""
