"""Entry points, one module per command (serve, certs, plan, check, classes, audit, quota, rollout,
policy test and compile, reporter, completion) behind one parser (`main`); `inputs` and `output` are theirs."""

from .certscli import overlay, webhook_configurations
from .inputs import load_inventory, read_inputs
from .main import main

__all__ = ["overlay", "webhook_configurations", "load_inventory", "main", "read_inputs"]
