"""Entry points, one module per command (`servecli`, `certscli`, `plancli`, `checkcli`, `auditcli`,
`reportercli`) behind one parser (`main`); `inputs` reads manifests and inventories for them."""

from .certscli import overlay, webhook_configurations
from .inputs import load_inventory, read_inputs
from .main import main
from .plancli import plan_objects

__all__ = ["overlay", "webhook_configurations", "load_inventory", "main", "plan_objects", "read_inputs"]
