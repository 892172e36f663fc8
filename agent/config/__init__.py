"""AgentConfig: model, validation, sources and their precedence."""

from agent.config.loaded import LoadedConfig
from agent.config.model import API_VERSION, KIND, AgentConfig, AgentSpec
from agent.config.sources.chain import default_sources, load_config

__all__ = ["API_VERSION", "KIND", "AgentConfig", "AgentSpec", "LoadedConfig",
           "default_sources", "load_config"]
