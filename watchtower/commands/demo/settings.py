"""The demo's settings: its options, and the service's settings pointed at what the demo starts (the
simulator with DRA-only nodes, the SMTP and webhook sinks as receivers, a local store, token and
Prometheus)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import SecretStr

from watchtower.config.alerting import (
    AlertingConfig,
    EmailConfig,
    ReceiverConfig,
    RouteConfig,
    WebhookConfig,
)
from watchtower.config.model import Settings, SimulatorConfig
from watchtower.config.owners import ContactConfig, OwnersConfig
from watchtower.config.prometheus import PrometheusConfig

RECEIVER = "demo-oncall"
MAIL_TO = "oncall@demo.invalid"
TEAM_HOOK = "demo-team-hook"  # the last simulated team's contact: owner notices to the webhook sink


def owner_address(team: str) -> str:
    """The address the demo configures as a team's contact: its owner notices arrive in the SMTP sink."""
    return f"{team}-owners@demo.invalid"


# Wall-clock seconds: Prometheus stamps samples with real time, however fast the simulator runs.
SCRAPE_EVERY = 2.0
IDLE_WINDOW = 30.0
DEMO_DRA_NODES = 2  # nodes whose GPUs NVIDIA's DRA driver offers: the story's DRA Job waits for them


@dataclass
class DemoOptions:
    port: int = 0
    seed: int | None = None
    prometheus: bool = True
    speed: float | None = None  # simulated seconds per real second (default: the simulator's, 60)
    evaluate_every: float = 2.0  # real seconds between evaluations
    past_week: bool = True  # simulate the last complete week at full speed, for its fairness report
    past_week_span: float | None = None  # simulate only its first seconds (a shorter past, for tests)


def demo_simulator(sim: SimulatorConfig) -> dict[str, Any]:
    """Return what the demo changes in the simulator: DRA-only nodes, so that its story shows DRA GPUs."""
    return {"dra_nodes": sim.dra_nodes or DEMO_DRA_NODES}


def demo_settings(
    base: Settings,
    *,
    opts: DemoOptions,
    url: str,
    smtp_port: int,
    hook_url: str,
    secret: str,
    store_path: str,
    prometheus_url: str | None,
    api_token: str,
) -> Settings:
    """Return `base` with the demo's simulator, receivers (the sinks), store, token and Prometheus."""
    sim_update: dict[str, Any] = {"metrics_port": 0}  # the demo serves the exporter itself
    sim_update.update(demo_simulator(base.simulator))
    if opts.seed is not None:
        sim_update["seed"] = opts.seed
    if opts.speed is not None:
        sim_update["speed"] = opts.speed
    receiver = ReceiverConfig(
        name=RECEIVER,
        email=[
            EmailConfig.model_validate(
                {
                    "to": [MAIL_TO],
                    "from": "watchtower@demo.invalid",
                    "smarthost": "127.0.0.1",
                    "port": smtp_port,
                    "security": "none",
                }
            )
        ],
        webhooks=[WebhookConfig(url=hook_url, secret=SecretStr(secret))],
    )
    team_hook = ReceiverConfig(
        name=TEAM_HOOK, webhooks=[WebhookConfig(url=hook_url, secret=SecretStr(secret))]
    )
    alerting = AlertingConfig(
        rules=base.alerting.rules,
        route=RouteConfig(receiver=RECEIVER, group_by=["alertname", "namespace"]),
        receivers=[receiver, team_hook],
        delivery=base.alerting.delivery,
        store_path=store_path,
    )
    prometheus = None
    if prometheus_url is not None:
        prometheus = PrometheusConfig(
            url=prometheus_url,
            timeout=5.0,
            retries=1,
            scrape_interval=SCRAPE_EVERY,
            query_every=5.0,
            query_step=SCRAPE_EVERY,
            idle_window=IDLE_WINDOW,
        )
    return base.model_copy(
        update={
            "cluster": base.cluster.model_copy(update={"source": "sim"}),
            "simulator": base.simulator.model_copy(update=sim_update),
            # Simulated time runs `speed` times faster: evaluate often enough that the page moves smoothly.
            "queue": base.queue.model_copy(update={"evaluate_every": opts.evaluate_every}),
            "server": base.server.model_copy(
                update={"host": "127.0.0.1", "external_url": url, "api_token": SecretStr(api_token)}
            ),
            "alerting": alerting,
            "prometheus": prometheus,
            "owners": demo_owners(base.simulator.teams),
        }
    )


def demo_owners(teams: list[str]) -> OwnersConfig:
    """Owner notices on, a contact per simulated team: an address each (the SMTP sink), the last team's
    through a receiver (the webhook sink)."""
    *mailed, hooked = teams or ["vision"]
    contacts = [ContactConfig(team=t, email=[owner_address(t)]) for t in mailed]
    contacts.append(ContactConfig(team=hooked, receiver=TEAM_HOOK))
    return OwnersConfig(
        enabled=True, contacts=contacts, smtp_receiver=RECEIVER, allowed_domains=["demo.invalid"]
    )
