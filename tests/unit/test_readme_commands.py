"""The README's front door counts what it shows: its "N commands" heading names as many
commands as its block lists."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"
NUMBERS = {"One": 1, "Two": 2, "Three": 3, "Four": 4, "Five": 5}


def test_the_commands_heading_counts_its_block():
    text = README.read_text()
    found = re.search(r"^## (\w+) commands\n+```bash\n(.*?)```", text, re.M | re.S)
    assert found, "the README has a '## N commands' section with a bash block"
    commands = [line for line in found.group(2).splitlines() if line.strip()]
    assert NUMBERS[found.group(1)] == len(commands), (found.group(1), commands)
