"""`dra-bridge rollout`: GPU nodes move from the device plugin to NVIDIA's DRA driver in waves. Pure.

The cluster comes in as plain objects; out come which side each node is on (sides), the GPU
pods and where each belongs when recreated, as the webhook decides it (pods), where the
scheduler could place them (placement), the waves and what blocks them (waves), the record a
move keeps on its node (record) and a truthful status (status). The API calls and the steps
that act on a node live in app.kube.rollout and the mover (mover), driven by app.cli.rolloutcli.
"""

from . import lease
from .mover import Mover, NodeAPI, Stopped
from .orders import RunOrder, undo_wave, wave_to_run, whole_wave
from .pods import ROOM_CODES, PodView, bound_by_owner, live, owner_of, pod_views
from .record import MoveRecord, Step, forget
from .sides import (BEFORE, BOTH, HAZARDS, NEITHER, STATES, UNKNOWN, NodeBefore, Side, DENIED, DRA, MOVING, PLUGIN, SHADOW_OF, STEP, WAVE, NodeView, Switches, before_move, node_view,
                    plugin_advertised, published, slices_ready, index_states)
from .status import NAMED, POD_STATES, hazards, in_trouble, state_hazards, summary
from .undo import plan_undo, selects_on
from .waves import Back, DRA_AFTER, DRA_BACK, LOST, PLUGIN_BACK, PLUGIN_FOR_NOW, Drain, Wave, plan_waves

__all__ = ["lease", "RunOrder", "undo_wave", "wave_to_run", "whole_wave", "Back", "BOTH", "HAZARDS", "NEITHER", "NodeBefore", "STATES", "UNKNOWN", "Side", "BEFORE", "DENIED", "DRA", "DRA_AFTER", "DRA_BACK", "Drain", "LOST", "MOVING", "MoveRecord", "Mover", "NodeAPI", "Stopped", "NodeView", "PLUGIN",
           "PLUGIN_BACK", "PLUGIN_FOR_NOW", "POD_STATES", "PodView", "ROOM_CODES", "SHADOW_OF", "STEP", "Step", "Switches", "WAVE",
           "Wave", "before_move", "bound_by_owner", "forget", "hazards", "in_trouble", "state_hazards", "live", "node_view", "owner_of",
           "NAMED", "plan_waves", "plan_undo", "selects_on", "index_states", "plugin_advertised", "pod_views", "published", "slices_ready", "summary"]
