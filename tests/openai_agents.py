"""Codex CLI, OpenCode and Aider themselves, driven through ``workbench wrap`` against the loopback OpenAI API.

Each runs fully offline: the configs and switches are those the project's client notes (2026-11-28) found to
make no outside lookups (Codex: a custom model provider, analytics and plugins off; OpenCode: ``--pure`` and
three ``OPENCODE_DISABLE_*`` switches, a config of its own; Aider: no update check, a model metadata file,
litellm's local cost map). Codex and OpenCode come from ``tests/e2e`` (npm, pinned); Aider from its own venv.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from loopback_openai import Scripted, Seen, chat_stream, function_call, message, responses_stream, usage

REPO_ROOT = Path(__file__).resolve().parents[1]
AGENTS = REPO_ROOT / "tests" / "e2e"
CODEX = AGENTS / "node_modules" / ".bin" / "codex"
OPENCODE = AGENTS / "node_modules" / ".bin" / "opencode"
KEY = "sk-fake-e2e-planted-openai-key-24680"
SECRET = "secret-42"


def install_npm_agents() -> bool:
    """The pinned agents of ``tests/e2e/package.json``, installed with npm when they are not there yet."""
    if not (CODEX.exists() and OPENCODE.exists()):
        npm = shutil.which("npm")
        if npm is None:
            return False
        subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=AGENTS, check=True, capture_output=True,
                       timeout=900)
    return CODEX.exists() and OPENCODE.exists()


def size(body: Any) -> int:
    return len(json.dumps(body)) // 4


def _last_output(items: list[Any]) -> str | None:
    last = items[-1] if items else {}
    return str(last.get("output")) if isinstance(last, dict) and last.get("type") == "function_call_output" else None


def codex_model(seen: Seen) -> Scripted:
    """Runs ``cat hello.txt`` once per question, then says what the output held."""
    items = seen.body.get("input") or []
    output = _last_output(items)
    turn = len(items)
    if output is None:
        call = function_call(f"call_{turn}", "exec_command", {"cmd": "cat hello.txt"})
        return responses_stream([call], response_id=f"resp_{turn}", use=usage(size(seen.body), 20))
    said = "it says secret-42" if SECRET in output else "I could not read it"
    return responses_stream([message(f"FINAL: {said}", f"msg_{turn}")], response_id=f"resp_{turn}",
                            use=usage(size(seen.body), 10))


def codex_home(root: Path, upstream: str) -> Path:
    """A CODEX_HOME whose config names a custom provider at ``upstream`` (the user's own, as wrap finds it)."""
    home = root / "codex-home"
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(f'''model = "fake-model"
model_provider = "fake"
approval_policy = "never"
sandbox_mode = "workspace-write"
check_for_update_on_startup = false

[model_providers.fake]
name = "Fake loopback"
base_url = "{upstream}"
env_key = "FAKE_API_KEY"
wire_api = "responses"

[analytics]
enabled = false

[features]
plugins = false
''')
    return home


def wrap(db: Path, work: Path, env: dict[str, str], *agent: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "workbench", "--db", str(db), "wrap", "--", *agent]
    done = subprocess.run(command, cwd=work, env=env, capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)
    if done.returncode != 0 or "stored session proxy-" not in done.stderr:
        raise RuntimeError(f"workbench wrap failed ({done.returncode}): {done.stderr.strip()[-3000:]}\n{done.stdout[-2000:]}")
    return done


def base_env(root: Path) -> dict[str, str]:
    home = root / "home"
    home.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ANTHROPIC_", "CODEX_", "OPENCODE_"))}
    env.update({"HOME": str(home), "WORKBENCH_CONFIG": str(home / "none.toml"), "NO_COLOR": "1"})
    return env


def chat_model(seen: Seen) -> Scripted:
    """Chat Completions: a title for a request without tools, else ``bash cat hello.txt`` then the answer."""
    messages = seen.body.get("messages") or []
    if not seen.body.get("tools"):
        return chat_stream("Reading hello", use={"prompt_tokens": 50, "completion_tokens": 3, "total_tokens": 53})
    last = messages[-1] if messages else {}
    use = {"prompt_tokens": size(seen.body), "completion_tokens": 20, "total_tokens": size(seen.body) + 20}
    if last.get("role") == "tool":
        said = "it says secret-42" if SECRET in str(last.get("content")) else "I could not read it"
        return chat_stream(f"FINAL: {said}", use=use)
    return chat_stream("", [(f"call_{len(messages)}", "bash", {"command": "cat hello.txt"})], use=use)
