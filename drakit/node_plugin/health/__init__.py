"""The device-health policy: which taint an unhealthy device gets, when, and within what budget.

* :mod:`.policy`: the operator's settings (taint effect per health reason, hysteresis counts,
  NoExecute budget) and their parsing from ``drakit node-plugin`` flags.
* :mod:`.hysteresis`: per-device state machine over consecutive health reports.
* :mod:`.budget`: which devices may hold a NoExecute taint, node-wide and cluster-wide.
* :mod:`.engine`: the three together, with an Event and metrics on every transition; the
  ResourceSlice publisher asks it which taint each device carries.
"""
