"""The Service: everything a running service holds, built once and shared by every request.

Routes get it as a dependency (`ServiceDep`); `create_app` puts it on the app and its lifespan
starts and closes it.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Annotated

from fastapi import Depends, Request

from edge.agent import Agent, plc_gateway, work_order_store
from edge.config import Config
from edge.run import RunRequest, RunStore, new_id, session_context
from edge.service.confirmation import Confirmations
from edge.service.event_stream import KEEP_ALIVE_S
from edge.service.health import PRIMING, Readiness, Warmup
from edge.service.runs import Asked, RunManager
from knowledge.page_images import PageImages
from tools import plant
from tools.plc.poller import Poller
from tools.plc.store import HistoryLimits, PlcStore

SESSION_SUMMARY_RUNS = 5


class Service:
    def __init__(
        self, config: Config, agent: Agent | None = None, poller: bool = False, keep_alive_s: float = KEEP_ALIVE_S
    ):
        self.config = config
        self.keep_alive_s = keep_alive_s
        self.with_poller = poller
        self.agent = agent or Agent(config)
        self.run_store = RunStore(config.state_path(config.service.run_store_file))
        self.work_orders = work_order_store(config)
        self.runs = RunManager(self.agent, self.run_store, config.service.max_concurrent_runs)
        self.confirmations = Confirmations(self.runs, self.work_orders, self.agent.registry)
        self.warmup = Warmup()
        self.readiness = Readiness(config, self.warmup, self.agent.llm_breaker)
        # Readiness probes block (TCP, HTTP); on threads of their own they never queue behind runs and
        # alarms in the shared thread pool, nor take its threads from them.
        self.health_pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="health")
        index_path = config.state_path(config.knowledge.index_file)
        self.page_images = PageImages(index_path, index_path.parent / "page-images")
        # Its own connection to the PLC cache: charts read the history without queueing behind tool reads.
        self.plc_history = PlcStore(config.state_path(config.plc.cache_file), history=HistoryLimits.of(config.plc))
        self.poller: Poller | None = None

    def start(self) -> None:
        """Background work, begun once the server is up: warming competes for the CPU with start-up imports."""
        self.warmup.start("models (manual search, lexicon)", self.agent.warm_tools)
        if self.agent.primes:
            self.warmup.start(PRIMING, self.agent.prime)
        if self.with_poller:
            self.poller = Poller(plc_gateway(self.config), self.config.plc.poll_interval_s)
            self.poller.start()

    def ask(
        self,
        question: str,
        device_id: str | None,
        session_id: str | None,
        request_id: str,
        client_request_id: str | None = None,
    ) -> Asked:
        """A technician's question as a run, in its session (a new one without `session_id`): earlier runs
        of the session are summarised for follow-ups. A `client_request_id` that started a run before gets
        that run (`RunManager.start`). Blocks on the run store; raises `UnknownDevice`."""
        if device_id is not None:
            plant.require(self.config.devices, device_id)
        session_id = session_id or new_id("ses")
        earlier = self.run_store.session_records(session_id, SESSION_SUMMARY_RUNS)
        require_confirmation = self.config.work_orders.require_confirmation
        return self.runs.start(
            RunRequest(
                question=question,
                device_id=device_id,
                session_id=session_id,
                session=session_context(earlier),
                actor="technician",
                require_confirmation=require_confirmation,
                propose_work_order=require_confirmation,
                request_id=request_id,
            ),
            client_request_id,
        )

    def close(self) -> None:
        self.runs.close()
        self.health_pool.shutdown(wait=False, cancel_futures=True)
        if self.poller is not None:
            self.poller.stop()
            self.poller.gateway.close()
        self.readiness.close()
        self.plc_history.close()
        self.agent.close()


async def get_service(request: Request) -> Service:  # async: a sync dependency takes a worker thread a request
    service: Service = request.app.state.service
    return service


ServiceDep = Annotated[Service, Depends(get_service)]
