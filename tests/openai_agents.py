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

try:
    from loopback_openai import (
        LoopbackOpenAI,
        Scripted,
        Seen,
        chat_stream,
        function_call,
        message,
        responses_stream,
        usage,
    )
except ImportError:  # run as ``python -m tests.openai_agents``
    from tests.loopback_openai import (
        LoopbackOpenAI,
        Scripted,
        Seen,
        chat_stream,
        function_call,
        message,
        responses_stream,
        usage,
    )

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


def wrap(db: Path, work: Path, env: dict[str, str], *agent: str, timeout: float = 600
         ) -> subprocess.CompletedProcess[str]:
    """``workbench wrap -- AGENT...`` in ``work`` (OpenCode takes its folder from ``PWD``, so that is set too)."""
    command = [sys.executable, "-m", "workbench", "--db", str(db), "wrap", "--", *agent]
    done = subprocess.run(command, cwd=work, env={**env, "PWD": str(work)}, capture_output=True, text=True, timeout=timeout,
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


def opencode_env(root: Path, upstream: str) -> dict[str, str]:
    """OpenCode with a config of its own naming a Chat Completions provider at ``upstream`` (the user's), its
    data folders in ``root`` and the switches that keep it offline."""
    env = base_env(root)
    for name, folder in (("XDG_CONFIG_HOME", "config"), ("XDG_DATA_HOME", "data"), ("XDG_CACHE_HOME", "cache"),
                         ("XDG_STATE_HOME", "state")):
        (root / folder).mkdir(parents=True, exist_ok=True)
        env[name] = str(root / folder)
    config = {
        "$schema": "https://opencode.ai/config.json", "model": "fake/fake-model", "small_model": "fake/fake-model",
        "permission": {"bash": "allow", "edit": "allow", "read": "allow", "external_directory": "allow"},
        "provider": {"fake": {
            "npm": "@ai-sdk/openai-compatible", "name": "Fake loopback (chat completions)",
            "options": {"baseURL": upstream, "apiKey": KEY},
            "models": {"fake-model": {"name": "Fake model", "tool_call": True,
                                      "limit": {"context": 128000, "output": 4096}}}}},
    }
    path = root / "opencode-config.json"
    path.write_text(json.dumps(config))
    env.update({"OPENCODE_CONFIG": str(path), "OPENCODE_DISABLE_AUTOUPDATE": "1",
                "OPENCODE_DISABLE_MODELS_FETCH": "1", "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1"})
    return env


AIDER = AGENTS / ".venv" / "bin" / "aider"
AIDER_REQUIREMENTS = AGENTS / "requirements-aider.txt"


def install_aider() -> Path | None:
    """Aider (pinned in ``tests/e2e/requirements-aider.txt``) in a venv of its own, made when it is not there yet."""
    if not AIDER.exists():
        venv = AGENTS / ".venv"
        made = subprocess.run([sys.executable, "-m", "venv", str(venv)], capture_output=True, timeout=300)
        if made.returncode != 0:
            return None
        subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "-r", str(AIDER_REQUIREMENTS)], check=True,
                       capture_output=True, timeout=1800)
    return AIDER


def aider_model(seen: Seen) -> Scripted:
    """Aider's whole-file edit format: the file again, with the secret changed."""
    return chat_stream("I will change the secret.\n\nhello.txt\n```\nsecret-43\n```\n")


def aider_env(root: Path, upstream: str) -> tuple[dict[str, str], list[str]]:
    """Aider's environment (its own ``OPENAI_API_BASE`` at ``upstream``) and the switches that keep it offline."""
    env = base_env(root)
    env.update({"OPENAI_API_BASE": upstream, "OPENAI_API_KEY": KEY, "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
    metadata = root / "model-metadata.json"
    metadata.write_text(json.dumps({"openai/fake-model": {
        "max_input_tokens": 128000, "max_output_tokens": 4096, "max_tokens": 4096, "input_cost_per_token": 0,
        "output_cost_per_token": 0, "litellm_provider": "openai", "mode": "chat"}}))
    flags = ["--model", "openai/fake-model", "--no-git", "--yes-always", "--analytics-disable", "--no-check-update",
             "--no-show-release-notes", "--model-metadata-file", str(metadata)]
    return env, flags


def main() -> int:
    """``python -m tests.openai_agents DB``: record a proxied Codex CLI session into DB (for the README picture)."""
    db = Path(sys.argv[1]).resolve()
    if not install_npm_agents():
        print("needs node and npm", file=sys.stderr)
        return 1
    root = db.parent / "codex-run"
    work = root / "work"
    work.mkdir(parents=True, exist_ok=True)
    (work / "hello.txt").write_text(f"{SECRET}\n")
    with LoopbackOpenAI(fallback=codex_model) as api:
        env = {**base_env(root), "CODEX_HOME": str(codex_home(root, api.url)), "FAKE_API_KEY": KEY}
        wrap(db, work, env, str(CODEX), "exec", "--skip-git-repo-check", "Run: cat hello.txt and tell me what it says")
        wrap(db, work, env, str(CODEX), "exec", "--skip-git-repo-check", "resume", "--last", "Say it once more")
    return 0


if __name__ == "__main__":
    sys.exit(main())
