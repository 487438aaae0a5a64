"""Claude Code itself, driven through ``workbench wrap`` against the loopback Messages API: shared by the
end-to-end test and the script that records the README's proxied-session screenshot."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

try:
    from loopback_api import LoopbackAPI, Reply, text, tool_use
except ImportError:  # run as ``python -m tests.claude_code_agent``
    from tests.loopback_api import LoopbackAPI, Reply, text, tool_use

REPO_ROOT = Path(__file__).resolve().parents[1]
AGENTS = REPO_ROOT / "tests" / "e2e"
CLAUDE = AGENTS / "node_modules" / ".bin" / "claude"
KEY = "sk-ant-api03-e2e-planted-key-9876543210"
SECRET_WORD = "pelican"


def install_claude() -> Path | None:
    """The pinned Claude Code (``tests/e2e/package.json``), installed with npm when it is not there yet;
    None without npm."""
    with (AGENTS / "package.json").open("rb") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one install at a time: the suite's workers may all ask at once
        if not CLAUDE.exists():
            npm = shutil.which("npm")
            if npm is None:
                return None
            subprocess.run([npm, "ci" if (AGENTS / "package-lock.json").exists() else "install", "--no-audit",
                            "--no-fund"], cwd=AGENTS, check=True, capture_output=True, timeout=600)
    return CLAUDE


def size(body: dict[str, Any]) -> int:
    """About what the API would report for the request: its JSON's length over four."""
    return len(json.dumps(body)) // 4


def has_result(body: dict[str, Any]) -> bool:
    content = (body.get("messages") or [{}])[-1].get("content")
    return isinstance(content, list) and any(isinstance(b, dict) and b.get("type") == "tool_result" for b in content)


def model(work: Path) -> Any:
    """A model that reads the file once per question, then answers from what it read."""
    def respond(body: dict[str, Any]) -> Reply:
        names = [t.get("name") for t in body.get("tools") or []]
        if "Read" in names and not has_result(body):
            turn = len(body.get("messages") or [])
            return Reply([text("Let me read it."), tool_use(f"toolu_{turn:02d}", "Read",
                                                            {"file_path": str(work / "hello.txt")})],
                         input_tokens=size(body), output_tokens=30)
        if has_result(body):
            return Reply([text(f"The file says the word is {SECRET_WORD}.")], input_tokens=size(body), output_tokens=12)
        return Reply([text('{"title": "Reading hello"}')], input_tokens=120, output_tokens=8)
    return respond


def wrap(db: Path, upstream: str, home: Path, work: Path, claude: Path, *args: str) -> dict[str, Any]:
    env = {**os.environ, "HOME": str(home), "ANTHROPIC_API_KEY": KEY, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
           "WORKBENCH_CONFIG": str(home / "none.toml")}
    env.pop("ANTHROPIC_BASE_URL", None)
    command = [sys.executable, "-m", "workbench", "--db", str(db), "wrap", "--upstream", upstream, "--",
               str(claude), *args, "--allowedTools", "Read", "--output-format", "json"]
    done = subprocess.run(command, cwd=work, env=env, capture_output=True, text=True, timeout=180)
    if done.returncode != 0 or "stored session proxy-" not in done.stderr:
        raise RuntimeError(f"workbench wrap failed: {done.stderr.strip()}")
    result: dict[str, Any] = json.loads(done.stdout)
    return result




def main() -> int:
    """``python -m tests.claude_code_agent DB``: record a proxied Claude Code session into DB."""
    db = Path(sys.argv[1]).resolve()
    claude = install_claude()
    if claude is None:
        print("needs node and npm", file=sys.stderr)
        return 1
    root = db.parent / "claude-code-run"
    home, work = root / "home", root / "work"
    home.mkdir(parents=True, exist_ok=True)
    work.mkdir(parents=True, exist_ok=True)
    (work / "hello.txt").write_text(f"The word is {SECRET_WORD}.\n")
    with LoopbackAPI() as api:
        api.queue(*([model(work)] * 40))
        result = wrap(db, api.url, home, work, claude, "-p", "What does hello.txt say?")
        wrap(db, api.url, home, work, claude, "--resume", result["session_id"], "-p", "Say it once more?")
    print(result["session_id"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
