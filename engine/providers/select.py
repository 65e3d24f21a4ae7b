"""Which model a room uses: configured in agentdeck.toml, else the offline model."""

from __future__ import annotations

from dataclasses import dataclass

from engine.config import Config
from engine.providers.base import Provider
from engine.providers.offline import OfflineModel


@dataclass(frozen=True)
class ProviderChoice:
    """The provider in use and where its key comes from (never the key itself)."""

    provider: Provider
    key_source: str


def make_provider(config: Config) -> ProviderChoice:
    """The room's model. Real providers arrive with their issue; until then, offline."""
    return ProviderChoice(OfflineModel(delay=config.model.offline_delay), "none (offline model)")
