"""What is free, where: devices per pool and per DeviceClass, as KEP-5677 counts them.

``pools`` (one pool's status from its slices, the devices in use and the taint rules), ``classes``
(the devices a DeviceClass admits), ``tally`` (a whole snapshot, reusing what did not change since
the previous one), ``answer`` (the ``DeviceAvailability`` document). Shared by ``draguard
devices``, ``serve``'s metrics and the headroom's limits.
"""

from policies.availability.pools import Counts, PoolStatus
from policies.availability.tally import ZONE_LABEL, Availability, ClassStatus, Tally

__all__ = ["ZONE_LABEL", "Availability", "ClassStatus", "Counts", "PoolStatus", "Tally"]
