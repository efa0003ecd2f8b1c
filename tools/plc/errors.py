"""What can go wrong on a PLC read, in two families the policy treats differently.

`NoCommunication`: nothing usable came back (timeout, refused, gateway says the
target is silent). These fall back to the cache and count towards the breaker,
except `PlcBusy`: our own queue for the connection used up the budget, which
says nothing about the PLC.
`PlcRejected`: the PLC answered, but with a Modbus exception or a reply that
does not fit the sensor map. The PLC is alive; the agent gets an error naming it.
"""

from __future__ import annotations

# Names from the Modbus application protocol spec, which is what a technician looks up.
EXCEPTION_NAMES = {
    1: "ILLEGAL FUNCTION",
    2: "ILLEGAL DATA ADDRESS",
    3: "ILLEGAL DATA VALUE",
    4: "SERVER DEVICE FAILURE",
    5: "ACKNOWLEDGE",
    6: "SERVER DEVICE BUSY",
    7: "NEGATIVE ACKNOWLEDGE",
    8: "MEMORY PARITY ERROR",
    10: "GATEWAY PATH UNAVAILABLE",
    11: "GATEWAY TARGET DEVICE FAILED TO RESPOND",
}
# A gateway reporting these has no contact with the PLC behind it: that is no communication.
GATEWAY_CODES = frozenset({10, 11})


class PlcReadError(Exception):
    pass


class NoCommunication(PlcReadError):
    """Base of the failures that fall back to the cache."""

    reason = "no communication"
    # Whether the breaker hears of it: only what the PLC did (or did not do) counts.
    counts_against_plc = True


class PlcTimeout(NoCommunication):
    reason = "timeout"


class PlcUnreachable(NoCommunication):
    reason = "unreachable"


class PlcBusy(NoCommunication):
    """Other reads of the same PLC held the connection for (most of) the budget."""

    reason = "busy"
    counts_against_plc = False


class PlcRejected(PlcReadError):
    """Base of the failures where the PLC answered unusably."""


class ModbusExceptionReply(PlcRejected):
    def __init__(self, code: int, where: str):
        self.code = code
        self.name = EXCEPTION_NAMES.get(code, f"exception code {code}")
        super().__init__(f"Modbus exception {code} ({self.name}) reading {where}")


class MalformedReply(PlcRejected):
    pass
