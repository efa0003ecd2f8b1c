"""The edge service: FastAPI app, run streaming, MES alarms, health and metrics (see `edge.service.app`)."""
