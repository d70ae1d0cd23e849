"""The README's "Testing your own approval flows" example runs as written."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def _example() -> str:
    text = README.read_text(encoding="utf-8")
    section = text.split("## Testing your own approval flows", 1)[1].split("\n## ", 1)[0]
    match = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert match is not None, "the README section has no python example"
    return match.group(1)


async def test_the_readme_testing_example_passes() -> None:
    namespace: dict[str, object] = {"__name__": "readme_example"}
    exec(compile(_example(), str(README), "exec"), namespace)
    tests = [value for name, value in namespace.items() if name.startswith("test_") and callable(value)]
    assert len(tests) == 1
    await tests[0]()  # type: ignore[operator]
