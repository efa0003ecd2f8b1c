"""The PLC sensor tool: Modbus TCP reads with cache fallback, breakers, poller and a plant simulator."""
