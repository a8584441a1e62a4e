"""`dra-bridge completion bash|zsh|fish`, and kubectl's plugin completion (`kubectl_complete-
dra_bridge`): both answer from the one parser tree, so a new flag completes without an edit here."""

from __future__ import annotations

import argparse
import sys


# Values no `choices` list: --inventory's words (besides a file), the kubeconfig's contexts and
# the cluster's namespaces, each read when completing.
FIXED_VALUES = {"--inventory": ["live", "example"]}
CONTEXTS = "@contexts"  # `kubectl config get-contexts -o name`
NAMESPACES = "@namespaces"  # `kubectl get namespaces`: one list call, 2 s at most
ASKED = {CONTEXTS: "kubectl config get-contexts -o name 2>/dev/null",
         NAMESPACES: "kubectl get namespaces --request-timeout=2s -o custom-columns=:metadata.name --no-headers "
                     "2>/dev/null"}


def tree(parser: argparse.ArgumentParser) -> dict:
    """{"flags": [...], "values": {flag: [...]}, "commands": {name: tree}} of a parser and its
    subcommands; values: what a flag's value may be (each of its spellings)."""
    flags = sorted(o for a in parser._actions if a.help != argparse.SUPPRESS for o in a.option_strings
                   if o.startswith("--"))
    values = {}
    for a in parser._actions:
        found = [str(c) for c in a.choices] if a.choices and not isinstance(a, argparse._SubParsersAction) else \
            FIXED_VALUES.get(a.option_strings[-1] if a.option_strings else "") or \
            ([CONTEXTS] if "--context" in a.option_strings else [NAMESPACES] if "--namespace" in a.option_strings
             else None)
        values.update({o: found for o in a.option_strings if found})
    commands = {name: tree(sub) for a in parser._actions if isinstance(a, argparse._SubParsersAction)
                for name, sub in a.choices.items()}
    return {"flags": flags, "values": values, "commands": commands}


def candidates(words: list[str], root: dict) -> list[str]:
    """What may come after `words` (the last one being typed)."""
    node, typed = root, words[-1] if words else ""
    for word in words[:-1]:
        if word in node["commands"]:
            node = node["commands"][word]
    after = node["values"].get(words[-2]) if len(words) > 1 else None
    if after is not None:
        pool = _contexts() if after == [CONTEXTS] else _namespaces() if after == [NAMESPACES] else after
    else:
        pool = node["flags"] if typed.startswith("-") else list(node["commands"]) or node["flags"]
    return [c for c in pool if c.startswith(typed)]


def _contexts() -> list[str]:
    """The contexts of the kubeconfig kubectl would read (none where there is none)."""
    from app.kube import kubeconfig_paths
    try:
        from kubernetes import config
        path = kubeconfig_paths(None)
        return [c["name"] for c in config.list_kube_config_contexts(config_file=path)[0]] if path else []
    except Exception:  # noqa: BLE001 - an unreadable kubeconfig: nothing to offer
        return []


def _namespaces() -> list[str]:
    """The namespaces of the cluster kubectl would ask (none where it does not answer in 2 s)."""
    try:
        from app import kube
        found = kube.connect(None, None, timeout_retries=False, request_timeout=2.0)
        return sorted(n["metadata"]["name"] for n in kube.list_items(found[0], "/api/v1/namespaces")) if found else []
    except Exception:  # noqa: BLE001 - no cluster, or a slow one: nothing to offer
        return []


def _shell_words(values: list[str], fish: bool = False) -> str:
    """The words a shell offers: listed, or a command it runs when completing."""
    if values[0] not in ASKED:
        return " ".join(values)
    return f"({ASKED[values[0]]})" if fish else f"$({ASKED[values[0]]})"


def _value_cases(node: dict, indent: str) -> str:
    """bash: a value after a flag that takes listed ones completes from them."""
    by_values: dict[str, list[str]] = {}
    for flag, values in sorted(node["values"].items()):
        words = _shell_words(values)
        by_values.setdefault(words, []).append(flag)
    return "".join(f'{indent}{"|".join(flags)}) opts="{words}"; COMPREPLY=($(compgen -W "$opts" -- "$cur")); '
                   f'return;;\n' for words, flags in by_values.items())


def script(shell: str, root: dict) -> str:
    if shell == "fish":
        return _fish(root)
    cases = []
    for name, node in sorted(root["commands"].items()):
        inner = "".join(f'            {sub})\n              case "$prev" in\n{_value_cases(leaf, " " * 16)}'
                        f'              esac\n              opts="{" ".join(leaf["flags"])}";;\n'
                        for sub, leaf in sorted(node["commands"].items()))
        if inner:
            cases.append(f'        {name})\n          case "$sub" in\n{inner}'
                         f'            *) opts="{" ".join(node["commands"])}";;\n          esac;;\n')
        else:
            cases.append(f'        {name})\n          case "$prev" in\n{_value_cases(node, " " * 12)}'
                         f'          esac\n          opts="{" ".join(node["flags"])}";;\n')
    body = ("_dra_bridge() {\n    local cur=\"${COMP_WORDS[COMP_CWORD]}\" cmd=\"${COMP_WORDS[1]}\" "
            "sub=\"${COMP_WORDS[2]}\" prev=\"${COMP_WORDS[COMP_CWORD-1]}\" opts\n"
            "    if [ \"$COMP_CWORD\" -eq 1 ]; then cmd=''; fi\n    if [ \"$COMP_CWORD\" -eq 2 ]; then sub=''; fi\n"
            "    case \"$cmd\" in\n"
            + "".join(cases) + f'        *) opts="{" ".join(sorted(root["commands"]))}";;\n    esac\n'
            "    COMPREPLY=($(compgen -W \"$opts\" -- \"$cur\"))\n}\n"
            "complete -o default -F _dra_bridge dra-bridge\n")
    if shell == "zsh":
        return "autoload -U +X bashcompinit && bashcompinit\n" + body
    return body


def _fish(root: dict) -> str:
    lines = ["complete -c dra-bridge -f"]
    names = " ".join(sorted(root["commands"]))
    lines.append(f'complete -c dra-bridge -n "not __fish_seen_subcommand_from {names}" -a "{names}"')
    for name, node in sorted(root["commands"].items()):
        seen = f"__fish_seen_subcommand_from {name}"
        if node["commands"]:
            lines.append(f'complete -c dra-bridge -n "{seen}" -a "{" ".join(node["commands"])}"')
        values = {f: v for leaf in [node, *node["commands"].values()] for f, v in leaf["values"].items()}
        for flag in sorted({f for leaf in [node, *node["commands"].values()] for f in leaf["flags"]}):
            listed = f" -x -a '{_shell_words(values[flag], fish=True)}'" if flag in values else ""
            lines.append(f'complete -c dra-bridge -n "{seen}" -l {flag[2:]}{listed}')
    return "\n".join(lines) + "\n"


def run_completion(args) -> int:
    from .main import build_parser
    sys.stdout.write(script(args.shell, tree(build_parser())))
    return 0


def kubectl_complete() -> int:
    """kubectl (1.26+) runs `kubectl_complete-dra_bridge WORDS...` for `kubectl dra-bridge <TAB>`:
    one candidate per line, then cobra's directive (4: no file completion)."""
    from .main import build_parser
    for candidate in candidates(sys.argv[1:] or [""], tree(build_parser())):
        print(candidate)
    print(":4")
    return 0
