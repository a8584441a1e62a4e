"""Entry points, one module per command (`servecli`, `certscli`, `plancli`, `checkcli`, `auditcli`,
`reportercli`) behind one parser (`main`); `inputs` reads manifests and inventories for them, `output` holds what their tables share."""

from .certscli import overlay, webhook_configurations
from .inputs import load_inventory, read_inputs
from .main import main

__all__ = ["overlay", "webhook_configurations", "load_inventory", "main", "read_inputs"]
