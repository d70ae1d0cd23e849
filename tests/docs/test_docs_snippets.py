"""Every code block of README.md and docs/ runs as written, or is marked as a fragment (see snippets.py)."""

from __future__ import annotations

import ast
import asyncio
import inspect
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from goldfive_core.policy import parse_policy
from goldfive_core.server.notify import load_notify_config
from tests.docs.snippets import ROOT, Block, all_blocks, blocks, doc_files, run_pytest

PYTHON = all_blocks("python")
TOML = all_blocks("toml")


def _is_pytest_file(block: Block) -> bool:
    tree = ast.parse(block.code)
    return any(
        isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test_") for node in tree.body
    )


def _run_imports(block: Block) -> None:
    """A fragment's imports still name real things: run them."""
    tree = ast.parse(block.code, block.where)
    imports = [node for node in tree.body if isinstance(node, ast.Import | ast.ImportFrom)]
    exec(compile(ast.Module(body=imports, type_ignores=[]), block.where, "exec"), {"__name__": "doc_snippet"})


def test_the_docs_have_code_to_run() -> None:
    # The walk finds the pages: a broken glob or a renamed folder would make every test below vacuous.
    assert len(doc_files()) > 20
    runnable = [b for b in PYTHON if not b.fragment]
    assert len(runnable) >= 5, [b.where for b in runnable]


@pytest.mark.parametrize("block", [b for b in PYTHON if not _is_pytest_file(b)], ids=lambda b: b.where)
def test_python_block_runs(block: Block, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Sync on purpose: a block may call asyncio.run() itself, which needs no loop running around it.
    code = compile(block.code, block.where, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    if block.fragment:
        _run_imports(block)
        return
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": "__main__"}
    result = eval(code, namespace)  # a code object with top-level await evaluates to a coroutine
    if inspect.iscoroutine(result):
        asyncio.run(result)


@pytest.mark.parametrize("block", [b for b in PYTHON if _is_pytest_file(b)], ids=lambda b: b.where)
def test_python_test_file_passes_under_pytest_as_copied(block: Block, tmp_path: Path) -> None:
    assert not block.fragment, f"{block.where}: a test file in the docs is meant to be copied whole"
    # pytest's defaults (an empty pytest.ini roots it here), not this repository's configuration.
    proc = run_pytest(tmp_path, {"pytest.ini": "[pytest]\n", "test_from_the_docs.py": block.code})
    assert proc.returncode == 0, f"{block.where}:\n{proc.stdout}\n{proc.stderr}"
    assert " passed" in proc.stdout and "skipped" not in proc.stdout, proc.stdout


@pytest.mark.parametrize("block", TOML, ids=lambda b: b.where)
def test_toml_block_loads(block: Block, tmp_path: Path) -> None:
    data = tomllib.loads(block.code)
    if "rule" in data:
        assert parse_policy(block.code, source=block.where).rules
    elif {"webhook", "slack", "email"} & data.keys():
        path = tmp_path / "notify.toml"
        path.write_text(block.code, encoding="utf-8")
        # The secrets and URLs the example names come from the environment; any well-formed value will do.
        tables = [t for value in data.values() if isinstance(value, list) for t in value]
        names = [v for t in tables for k, v in t.items() if k.endswith("_env") and isinstance(v, str)]
        env = {name: "https://hooks.invalid/x" if "URL" in name else "x" for name in names}
        assert load_notify_config(path, env=env).targets


def test_readme_commands_run_from_a_fresh_checkout() -> None:
    # After `make demo` the command is .venv/bin/goldfive: a bare `goldfive` is not on PATH (issue #24).
    readme = ROOT / "README.md"
    for block in blocks(readme):
        if block.lang not in ("bash", "sh", "console"):
            continue
        for line in block.code.splitlines():
            assert not line.lstrip().startswith("goldfive "), f"{block.where}: {line.strip()!r}"


_GLOBAL_WITH_VALUE = {"--db", "--dsn", "--schema", "--url", "--token", "--timeout"}


def _commands() -> set[str]:
    # What the installed command itself lists (`goldfive --help`), not a private parser.
    exe = Path(sys.executable).with_name("goldfive")
    out = subprocess.run([str(exe), "--help"], capture_output=True, text=True, timeout=60, check=True).stdout
    return set(re.findall(r"^    ([a-z]+)\s", out, re.MULTILINE))


def test_every_goldfive_command_on_the_pages_exists() -> None:
    commands = _commands()
    assert {"pending", "approve", "serve", "users"} <= commands
    seen = 0
    for block in all_blocks("bash"):
        for line in block.code.splitlines():
            words = line.split("#", 1)[0].split()
            if not words or words[0] not in ("goldfive", ".venv/bin/goldfive"):
                continue
            rest = words[1:]
            while rest and rest[0].startswith("--"):
                rest = rest[2:] if rest[0] in _GLOBAL_WITH_VALUE else rest[1:]
            assert rest and rest[0] in commands, f"{block.where}: {line.strip()!r} names no goldfive command"
            seen += 1
    assert seen > 10
