"""The config model: stack YAML -> frozen, validated objects. See stack.py for the entry point.

May import: facts (and nothing else of components: everything above depends on it).
"""

from components.config.cluster import ClusterConfig
from components.config.fabric import FabricConfig, PortRange
from components.config.network import MonitoringIngress, NetworkConfig
from components.config.node_pools import NodePoolConfig, Taint
from components.config.reader import ConfigError, ConfigProblem
from components.config.registry import RegistryConfig
from components.config.secrets import SecretEntry, SecretsConfig
from components.config.stack import (
    StackConfig,
    TeamStackConfig,
    decode_raw_config,
    load_stack_config,
    read_raw_config,
    read_secret_keys,
)
from components.config.storage import StorageConfig
from components.config.vocabularies import AmiType, Capacity, NatLayout, TaintEffect

__all__ = [
    "AmiType",
    "Capacity",
    "ClusterConfig",
    "ConfigError",
    "ConfigProblem",
    "FabricConfig",
    "MonitoringIngress",
    "NatLayout",
    "NetworkConfig",
    "NodePoolConfig",
    "PortRange",
    "RegistryConfig",
    "SecretEntry",
    "SecretsConfig",
    "StackConfig",
    "StorageConfig",
    "Taint",
    "TaintEffect",
    "TeamStackConfig",
    "decode_raw_config",
    "load_stack_config",
    "read_raw_config",
    "read_secret_keys",
]
