"""Which wave a command may act on, and on which nodes: waves run in order, a done wave is done,
a blocked one is refused with its blockers, and a node selector never splits a wave recorded on
its nodes. Pure: the CLI parses, calls and prints."""

from __future__ import annotations

from dataclasses import dataclass

from app.common import InputError, view_of
from app.policy import LabelSelector

from .record import MoveRecord
from .sides import WAVE, NodeView
from .undo import plan_undo
from .waves import Wave


@dataclass(frozen=True)
class RunOrder:
    wave: Wave
    done: bool = False  # nothing to do: said, exit 0
    blocked: bool = False  # refused with the wave's blockers, nothing done


def wave_to_run(waves: list[Wave], number: int, nodes: list[NodeView], selector: str | None = None,
                flag: str = "--nodes") -> RunOrder:
    """The wave `rollout run --wave number` acts on; InputError naming the flag when it may not."""
    wave = next((w for w in waves if w.number == number), None)
    if wave is None:
        planned = ", ".join(str(w.number) for w in waves if not w.done) or "none"
        raise InputError("--wave", f"no wave {number} (waves not done: {planned}; `rollout plan` lists them)")
    if wave.done:
        return RunOrder(wave, done=True)
    earlier = [w.number for w in waves if w.number < wave.number and not w.done]
    if earlier:
        raise InputError("--wave", f"wave {earlier[0]} is not done yet: waves run in order")
    if wave.blockers and not any(n.wave == wave.number for n in nodes):
        return RunOrder(wave, blocked=True)
    whole_wave(selector, nodes, wave.nodes, wave.number, flag)
    return RunOrder(wave)


def whole_wave(selector: str | None, nodes: list[NodeView], names: list[str], number: int,
               flag: str = "--nodes") -> None:
    """A selector means those nodes: a wave (recorded on its nodes by an earlier run) with a node
    it leaves out is refused whole, nothing done."""
    if not selector:
        return
    chosen = LabelSelector.parse(selector, flag)
    left_out = [n.name for n in nodes if n.name in names and not chosen.matches(n.labels)]
    if left_out:
        raise InputError(flag, f"wave {number} is {', '.join(names)}, and {flag} {selector} leaves out "
                               f"{', '.join(left_out)}: nothing was done. Continue that wave without {flag} "
                               "(or wait for whoever runs it); a new wave for other nodes comes after it")


def undo_wave(number: int, nodes: list[NodeView], pods, objects: dict, switches, drain, planning: bool) -> Wave:
    """Wave `number` taken back, judged before anything is done (an undo under way: only whether
    the device plugin can start again; `plan --undo` judges it whole)."""
    if not any(n.wave == number for n in nodes):
        raise InputError("--undo" if planning else "--wave", f"no node carries wave {number} ({WAVE})")
    records = {view_of(n).name: MoveRecord.of(n) for n in objects["nodes"]}
    started = any(r is not None and r.wave == number and r.step.undoing for r in records.values())
    return plan_undo(number, nodes, pods, records, objects.get("daemonsets", []),
                     objects["poddisruptionbudgets"], switches, drain, room=planning or not started)
