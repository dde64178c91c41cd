"""The one clock that drives durable timers, NCRONTAB schedules, message visibility and the
orchestrations' ``current_utc_datetime``.

``VirtualClock`` only moves when the host is idle and jumps straight to the next thing that is
due, so a test with a 30-minute timer runs in milliseconds. It is the app's ``ManualClock``: the
host hands it to the app in-process (``adapters.clock.use_host_clock``), so both share one time.
"""

from adapters.clock import ManualClock, SystemClock
from domain.ports import Clock

VirtualClock = ManualClock

__all__ = ["Clock", "SystemClock", "VirtualClock"]
