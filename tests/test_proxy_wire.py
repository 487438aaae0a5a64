"""What the workbench shows for a proxied agent is what that agent sends next: the proxy as a real server, the
real anthropic SDK as the agent, a loopback Messages API upstream that records (and counts) what it receives.

The property test drives random sequences of every steering action (pin, unpin, prune, restore, archive, unarchive,
the five strategies, compaction and its undo, undo and redo; offload, which these requests cannot carry)
and after each one checks that the request forwarded next equals the session's projection and is one the API
accepts."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, note, settings
from hypothesis import strategies as st
from loopback_api import Reply, text
from proxy_support import request
from wire_steering import CONFIG, KEY, SMALL_TAIL, STRATEGIES, WIRE_ACTIONS, Action, Wire, user, wire

from workbench.engine.context.effective import PINNED_WHY
from workbench.engine.context.effective import PRUNED_PLACEHOLDER as PRUNED
from workbench.engine.errors import WorkbenchError
from workbench.engine.plans.compaction import Compactor
from workbench.engine.plans.compaction_prompt import SUMMARY_PREFIX
from workbench.engine.plans.measure import apply, measure
from workbench.engine.plans.plan import undo
from workbench.engine.plans.strategies.archive import DIGEST_HEADER
from workbench.engine.plans.strategies.archive_digest import with_model_digest
from workbench.engine.plans.strategies.manual import plan_action
from workbench.engine.plans.strategies.registry import plan_strategy
from workbench.engine.plans.summarizers import LLMSummarizer
from workbench.engine.providers.anthropic import AnthropicProvider
from workbench.engine.settings.config import Config
from workbench.engine.transcript.store import Store
from workbench.engine.transcript.tokens import TokenCounter


@pytest.fixture(scope="module")
def shared_wire(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Wire]:
    """One proxy and upstream for every example: starting them is most of an example's time otherwise."""
    with wire(tmp_path_factory.mktemp("wire")) as w:
        yield w


ACTIONS = st.lists(st.tuples(st.sampled_from(WIRE_ACTIONS), st.integers(0, 40)), min_size=1, max_size=5)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                   HealthCheck.too_slow])
@given(actions=ACTIONS, every=st.booleans())
def test_the_forwarded_request_is_the_projection_after_any_steering(
    shared_wire: Wire, actions: list[tuple[Action, int]], every: bool
) -> None:
    """``every``: a request after each action (the agent working while the user steers), else one at the end."""
    conversation = shared_wire.conversation()
    conversation.send()
    done: list[str] = []
    for n, (action, target) in enumerate(actions):
        outcome = conversation.act(action, target)
        done.append(f"{action}({target}) -> {outcome}")
        note(done[-1])
        name = f"strategy {STRATEGIES[target % len(STRATEGIES)]}" if action == "strategy" else action
        event(f"{name} {'refused' if outcome.startswith('refused') else 'made'}")
        if every or n == len(actions) - 1:
            try:
                conversation.check()
            except AssertionError as exc:
                raise AssertionError(f"after {' ; '.join(done)}: {exc}") from exc


# --- the commands, on the wire --------------------------------------------------------------------------------

def workbench(db: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "workbench", "--db", str(db), *args], capture_output=True,
                          text=True, timeout=120, env={**os.environ, **(env or {})}, check=False)


def test_a_compaction_applied_reaches_the_next_request_and_its_undo_brings_the_history_back(
    tmp_path: Path, workbench_home: Path
) -> None:
    (workbench_home / "config.toml").write_text(SMALL_TAIL)
    with wire(tmp_path) as w:
        agent = w.conversation()
        full = agent.check()
        task = agent.messages[0]
        pinned = workbench(w.db, "pin", agent.session_id, "1")
        assert pinned.returncode == 0, pinned.stderr
        preview = workbench(w.db, "compact", agent.session_id, "--preview", "--json")
        assert preview.returncode == 0, preview.stderr
        plan = json.loads(preview.stdout)
        assert len(agent.check()) == len(full) + 2, "a preview changes nothing"

        applied = workbench(w.db, "compact", agent.session_id, "--apply")
        assert applied.returncode == 0, applied.stderr
        history = agent.messages
        compacted = agent.check()
        assert len(compacted) < len(history)
        summary, *kept = compacted[0]["content"]
        assert summary["type"] == "text" and summary["text"].startswith(SUMMARY_PREFIX)
        assert kept[:len(task["content"])] == task["content"], "the pinned first message follows, verbatim"
        tail = compacted[1:]
        assert tail == history[len(history) - len(tail):], "the kept tail as the agent sent it"
        assert len(plan["tail"]) <= len(tail) + 1

        later = agent.check()
        assert later[0]["content"][0] == summary and len(later) == len(compacted) + 2, "every later request too"

        undone = workbench(w.db, "compact", agent.session_id, "--undo")
        assert undone.returncode == 0, undone.stderr
        history = agent.messages
        assert agent.check() == history, "the full history again"


def test_a_pinned_message_is_refused_for_pruning_and_reaches_the_wire_as_written(tmp_path: Path) -> None:
    with wire(tmp_path) as w:
        agent = w.conversation()
        agent.send()
        with Store(w.db) as store:
            result = next(m for m in store.load_messages(agent.session_id) if m.tool_results())
        position = str(result.index + 1)
        assert workbench(w.db, "pin", agent.session_id, position).returncode == 0
        refused = workbench(w.db, "prune", agent.session_id, position)
        assert refused.returncode != 0
        [line] = refused.stderr.strip().splitlines()
        assert f"message #{position} is pinned" in line and "unpin it to prune it" in line
        planned = workbench(w.db, "plan", agent.session_id)
        assert f"pinned #{position}: {PINNED_WHY}" in planned.stdout, "the plan says why strategies pass over it"
        for strategy in ("dedup", "tool_output_pruning"):
            assert workbench(w.db, "apply", agent.session_id, "--strategy", strategy).returncode == 0
        sent = agent.check()
        assert sent[result.index] == agent.messages[result.index], "the pinned result as the agent sent it"
        listed = workbench(w.db, "history", agent.session_id)
        assert "pin" in listed.stdout


def test_an_archive_leaves_the_next_request_behind_its_digest_and_unarchive_brings_it_back(tmp_path: Path) -> None:
    with wire(tmp_path) as w:
        agent = w.conversation()
        agent.send()
        with Store(w.db) as store:
            ctx = agent.context(store)
            fixed = next(m for m in ctx.messages if any(p.kind == "tool_use" and p.name == "Bash" for p in m.parts))
            plan = measure(ctx, plan_action(ctx, "archive", fixed, CONFIG.strategies))
            apply(store, ctx, plan)
        history = agent.messages
        sent = agent.check()
        call = history[fixed.index]
        assert call not in sent and history[fixed.index + 1] not in sent, "the call and its result left the request"
        assert len(sent) == len(history) - 2 and sent == [m for m in history if m not in history[fixed.index:][:2]]

        with Store(w.db) as store:
            ctx = agent.context(store)
            apply(store, ctx, plan_strategy(ctx, "archive", CONFIG))
        history = agent.messages
        archived = agent.check()
        digest = next(b["text"] for m in archived for b in m["content"] if b.get("text", "").startswith(DIGEST_HEADER))
        assert "Read" in digest and len(archived) < len(history) - 2
        assert [b["text"] for b in archived[-1]["content"]] == [digest, history[-1]["content"][0]["text"]], \
            "the digest goes where the workbench wrote it: before what the agent sent after it"

        with Store(w.db) as store:
            undo(store, agent.context(store))
            ctx = agent.context(store)
            apply(store, ctx, measure(ctx, plan_action(ctx, "unarchive", fixed, CONFIG.strategies)))
        history = agent.messages
        assert agent.check() == history, "the whole history again, and no digest"


ARCHIVE_FILE = re.compile(r"are in a file written by the workbench: (/\S+\.txt) \(([\d,]+) bytes, ([\d,]+) lines\): "
                          r"read it with your file-reading tool")


def archive_file(sent: list[dict[str, Any]]) -> tuple[str, Path]:
    """The one digest the upstream received, and the file it names (checked to be as big as it says)."""
    [digest] = [b["text"] for m in sent for b in m["content"] if b.get("text", "").startswith(DIGEST_HEADER)]
    [found] = ARCHIVE_FILE.findall(digest)
    path = Path(found[0])
    content = path.read_text()
    assert int(found[1].replace(",", "")) == len(content.encode())
    assert int(found[2].replace(",", "")) == content.count("\n"), "the lines it says the file has"
    return digest, path


def left_out(history: list[dict[str, Any]], sent: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The calls and results the agent sent that did not go upstream."""
    upstream = json.dumps(sent)
    return [b for m in history if isinstance(m["content"], list) for b in m["content"]
            if b["type"] in ("tool_use", "tool_result") and json.dumps(b.get("id") or b["tool_use_id"]) not in upstream]


def test_an_archive_names_a_file_in_the_agents_directory_holding_what_left_the_request(tmp_path: Path) -> None:
    with wire(tmp_path) as w:
        agent = w.conversation()
        agent.send()
        with Store(w.db) as store:
            ctx = agent.context(store)
            apply(store, ctx, plan_strategy(ctx, "archive", CONFIG))
        history = agent.messages
        sent = agent.check()
        _, path = archive_file(sent)
        assert path.parent == w.cwd / ".workbench" / "archive", "inside the agent's working directory"
        gone = left_out(history, sent)
        assert len(gone) == 6, "three calls and their results left the request"
        content = path.read_text()
        for block in gone:
            if block["type"] == "tool_use":
                assert f"call {block['name']} (id {block['id']})" in content
                for value in block["input"].values():
                    assert json.dumps(value, ensure_ascii=False) in content, "the call's input, whole"
            else:
                assert f"(id {block['tool_use_id']}" in content and block["content"] in content, "the result, whole"

        with Store(w.db) as store:  # a second archive replaces the digest: its file holds both
            ctx = agent.context(store)
            apply(store, ctx, plan_strategy(ctx, "archive", Config.model_validate({"strategies": {"archive": {
                "cutoff": 1}}})))
        history = agent.messages
        sent = agent.check()
        again, both = archive_file(sent)
        assert both != path and str(path) not in again, "one digest, naming one file"
        gone = left_out(history, sent)
        held = both.read_text()
        assert len(gone) == 10 and all(f"(id {b.get('id') or b['tool_use_id']}" in held for b in gone)


def test_a_digest_the_model_writes_still_names_the_file(tmp_path: Path) -> None:
    with wire(tmp_path) as w:
        agent = w.conversation()
        agent.send()
        w.api.queue(Reply([text("Read calc.py twice and wrote it once.")]))
        writer = LLMSummarizer(AnthropicProvider(api_key=KEY, base_url=w.api.url, max_retries=0), "claude-opus-4-6")
        with Store(w.db) as store:
            ctx = agent.context(store)
            plan = asyncio.run(with_model_digest(ctx, plan_strategy(ctx, "archive", CONFIG), writer, print))
            apply(store, ctx, plan)
        sent = agent.check()
        digest, path = archive_file(sent)
        assert "Read calc.py twice and wrote it once." in digest and "(id t0a" in path.read_text()


def test_an_archive_is_refused_when_the_agent_has_no_file_to_read_it_back_from(tmp_path: Path) -> None:
    with wire(tmp_path) as w:
        agent = w.conversation()
        w.api.queue(Reply([text("Answer.")]))
        w.client.messages.create(**request(agent.messages))  # no working directory named in the prompt
        w.recorder.settle()
        placement = w.reports[-1].placement
        assert placement is not None
        agent.session_id = placement.thread.session_id
        with Store(w.db) as store:
            ctx = agent.context(store)
            with pytest.raises(WorkbenchError, match=r"^archive is not offered for this proxied session: its "
                                                     "requests do not name the agent's working directory"):
                plan_strategy(ctx, "archive", CONFIG)
        assert not (w.cwd / ".workbench").exists()


def test_when_the_agent_compacts_on_its_own_past_an_archive_its_digest_is_not_sent(tmp_path: Path) -> None:
    with wire(tmp_path) as w:
        agent = w.conversation()
        agent.send()
        with Store(w.db) as store:
            ctx = agent.context(store)
            apply(store, ctx, plan_strategy(ctx, "archive", CONFIG))
        assert DIGEST_HEADER in json.dumps(agent.check())
        agent.messages = [user("This session is being continued from a previous conversation that ran out of "
                               "context. The user fixed calc.py.")]
        assert agent.check() == agent.messages[:1], "the agent's own compaction goes upstream as it sent it"


def test_an_archive_that_would_split_a_pinned_pair_or_start_with_the_assistant_is_refused(tmp_path: Path) -> None:
    with wire(tmp_path) as w:
        agent = w.conversation()
        agent.send()
        with Store(w.db) as store:
            ctx = agent.context(store)
            first, call, answer = ctx.messages[0], ctx.messages[1], ctx.messages[2]
            with pytest.raises(WorkbenchError, match="the API refuses"):
                plan_action(ctx, "archive", first, CONFIG.strategies)
            apply(store, ctx, measure(ctx, plan_action(ctx, "pin", answer, CONFIG.strategies)))
            ctx = agent.context(store)
            with pytest.raises(WorkbenchError, match=f"message #{answer.index + 1}, the other half .* is pinned"):
                plan_action(ctx, "archive", call, CONFIG.strategies)
        history = agent.messages
        assert agent.check() == history


COUNTER = TokenCounter()


def counting(body: dict[str, Any]) -> Reply:
    """An upstream that reports, as the API does, how many tokens it received: here each block's tokens."""
    blocks = [*(body.get("system") or ()), *(body.get("tools") or ()),
              *(b for m in body["messages"] for b in m["content"])]
    received = sum(COUNTER.count_text(json.dumps({k: v for k, v in b.items() if k != "cache_control"}))
                   for b in blocks)
    return Reply([text("Done.")], input_tokens=received, output_tokens=5)


def test_after_steering_the_budget_is_what_the_api_counted(tmp_path: Path) -> None:
    with wire(tmp_path) as w:
        agent = w.conversation()
        for _ in range(3):  # the calibration learns the upstream's tokens
            agent.send(counting)
        with Store(w.db) as store:
            ctx = agent.context(store)
            read = next(m for m in ctx.messages if m.tool_results())
            apply(store, ctx, measure(ctx, plan_action(ctx, "prune", read, CONFIG.strategies)))
        agent.send(counting)
        received = w.api.requests[-1].body
        counted = counting(received).input_tokens
        assert PRUNED in json.dumps(received["messages"]), "the prune reached the wire"
        with Store(w.db) as store:
            ctx = agent.context(store)
            budget = ctx.budget()
            assert abs(budget.used - counted) <= 0.01 * counted, (budget.used, counted, budget.source_label())
            assert budget.steered == 0 and budget.source_label() == "reported by the API"
            later = next(m for m in reversed(ctx.messages) if m.tool_results() and m.id != read.id)
            apply(store, ctx, measure(ctx, plan_action(ctx, "prune", later, CONFIG.strategies)))
            after = agent.context(store).budget()
        assert after.steered > 0 and after.used == budget.used - after.steered
        assert after.source_label() == f"calibrated: reported {budget.used:,} − {after.steered:,} steered since"


def test_an_llm_summary_goes_through_the_sessions_upstream_with_the_workbenchs_own_key(
    tmp_path: Path, workbench_home: Path
) -> None:
    (workbench_home / "config.toml").write_text(SMALL_TAIL)
    with wire(tmp_path) as w:
        agent = w.conversation()
        agent.send()
        w.api.queue(Reply([text("The user asked to fix calc.py; it was fixed and the notes updated.")]))
        own = "sk-ant-api03-the-workbench-own-key-42"
        done = workbench(w.db, "compact", agent.session_id, "--preview", "--summarizer", "llm", "--json",
                         env={"ANTHROPIC_API_KEY": own})
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["summarizer"] == "llm"
        summarising = w.api.message_requests[-1]
        sent_key = summarising.headers.get("x-api-key") or summarising.headers["authorization"].removeprefix("Bearer ")
        assert sent_key == own != KEY, "the workbench's own key, not the agent's"
        assert "summar" in json.dumps(summarising.body).lower(), "the summariser's request"
        with Store(w.db) as store:
            assert own not in json.dumps(store.get_session(agent.session_id).metadata)


def test_when_the_agent_compacts_on_its_own_after_a_compaction_the_session_goes_on_past_its_pivot(
    tmp_path: Path,
) -> None:
    with wire(tmp_path) as w:
        agent = w.conversation()
        agent.send()
        with Store(w.db) as store:
            ctx = agent.context(store)
            compactor = Compactor(store, ctx, CONFIG.compaction)
            asyncio.run(compactor.apply(asyncio.run(compactor.preview("manual", None, summarizer="heuristic"))))
        assert agent.check()[0]["content"][0]["text"].startswith(SUMMARY_PREFIX)
        session_id = agent.session_id
        agent.messages = [user("This session is being continued from a previous conversation that ran out of "
                               "context. The user fixed calc.py.")]
        sent = agent.check()
        assert sent == agent.messages[:1], "the agent's own compaction goes upstream as it sent it"
        assert agent.session_id == session_id, "in the same session, past the agent's pivot"
