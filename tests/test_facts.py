"""The facts of a span (issue #42): each kind extracted from a hand-made span, then found or not found in
summaries written for the test."""

from __future__ import annotations

from typing import Any

import pytest

from workbench.engine.plans.fact_check import check
from workbench.engine.plans.facts import Fact, command_terms, extract, path_tails
from workbench.engine.transcript.models import Message, Part, TextPart, ToolResultPart, ToolUsePart


class Span:
    """Builds a span message by message: ``user``, ``say`` (assistant text), ``call`` (a tool call and its
    result in the next message)."""

    def __init__(self) -> None:
        self.messages: list[Message] = []

    def add(self, role: str, parts: list[Part], **extra: Any) -> str:
        mid = f"m{len(self.messages)}"
        self.messages.append(Message(id=mid, session_id="s", index=len(self.messages), role=role,  # type: ignore[arg-type]
                                     parts=parts, **extra))
        return mid

    def user(self, text: str, **extra: Any) -> str:
        return self.add("user", [TextPart(text=text)], **extra)

    def say(self, text: str) -> str:
        return self.add("assistant", [TextPart(text=text)])

    def call(self, name: str, tool_input: dict[str, Any], result: str = "ok", is_error: bool = False) -> str:
        tid = f"t{len(self.messages)}"
        mid = self.add("assistant", [ToolUsePart(id=tid, name=name, input=tool_input)])
        self.add("user", [ToolResultPart(tool_use_id=tid, text=result, is_error=is_error)], kind="tool_result")
        return mid


def facts_of(span: Span, kind: str) -> list[Fact]:
    return [f for f in extract(span.messages) if f.kind == kind]


def texts(facts: list[Fact]) -> list[str]:
    return [f.text for f in facts]


class TestFiles:
    def test_reads_and_edits_of_both_agents_tools(self) -> None:
        span = Span()
        read = span.call("Read", {"file_path": "/repo/lib/annotation.ex"})
        span.call("Edit", {"file_path": "/repo/lib/annotation.ex", "old_string": "a", "new_string": "b"})
        wrote = span.call("write_file", {"path": "src/new_module.py", "content": "x"})
        span.call("Edit", {"file_path": "/repo/missing.ex"}, "<tool_use_error>File does not exist.</tool_use_error>",
                  is_error=True)
        facts = facts_of(span, "file")
        assert texts(facts) == ["read and edited /repo/lib/annotation.ex", "edited src/new_module.py"]
        assert facts[0].message_id != read  # where it was last touched
        assert facts[1].message_id == wrote

    def test_a_path_is_kept_by_any_of_its_tails(self) -> None:
        span = Span()
        span.call("Write", {"file_path": "/repo/lib/spotter/annotation.ex", "content": ""})
        span.call("Read", {"file_path": "/repo/config/dev.exs"})
        facts = facts_of(span, "file")
        assert path_tails("/repo/lib/a.ex") == ("repo/lib/a.ex", "lib/a.ex", "a.ex")
        result = check(facts, "Modified annotation.ex (added a source attribute).")
        assert (result.kept, result.total) == (1, 2)
        assert texts(result.lost) == ["read /repo/config/dev.exs"]


class TestCommands:
    def test_commands_with_their_exit_status(self) -> None:
        span = Span()
        span.call("Bash", {"command": "cd /repo && mix test test/annotation_test.exs"}, "Exit code 2\nfailures",
                  is_error=True)
        span.call("shell", {"command": "git push origin main"}, "done\n[exit code 0]")
        facts = facts_of(span, "command")
        assert texts(facts) == ["ran `cd /repo && mix test test/annotation_test.exs` (exit 2)",
                                "ran `git push origin main` (exit 0)"]
        assert command_terms("cd /repo && mix test test/a.exs") == ("mix", "test", "a.exs")

    def test_a_command_is_kept_when_its_program_and_verb_appear(self) -> None:
        span = Span()
        span.call("Bash", {"command": "mix compile --force"}, "Compiled")
        span.call("Bash", {"command": "git push origin main"}, "pushed")
        result = check(facts_of(span, "command"), "Stale build artifacts required `mix compile --force`.")
        assert result.kept == 1
        assert texts(result.lost) == ["ran `git push origin main` (exit 0)"]


class TestErrors:
    def test_an_error_and_whether_a_later_retry_fixed_it(self) -> None:
        span = Span()
        first = span.call("Bash", {"command": "mix test"}, "Exit code 1\nRunning ExUnit\n** (CompileError) "
                          "undefined function frobnicate/1", is_error=True)
        span.call("Bash", {"command": "mix test"}, "43 tests, 0 failures")
        span.call("Bash", {"command": "git push"}, "Exit code 128\nfatal: no upstream branch", is_error=True)
        facts = facts_of(span, "error")
        assert texts(facts) == ["** (CompileError) undefined function frobnicate/1 (fixed later)",
                                "fatal: no upstream branch (not fixed)"]
        assert facts[0].message_id == first

    def test_an_error_is_kept_when_its_words_appear(self) -> None:
        span = Span()
        span.call("Bash", {"command": "git push"}, "Exit code 128\nfatal: no upstream branch", is_error=True)
        facts = facts_of(span, "error")
        assert check(facts, "git push failed: the branch had no upstream").kept == 1
        assert check(facts, "Pushed the branch.").kept == 0

    def test_a_rejected_call_is_not_an_error(self) -> None:
        span = Span()
        span.call("Edit", {"file_path": "a.py"}, "The user doesn't want to proceed with this tool use.", is_error=True)
        assert facts_of(span, "error") == []


class TestTodos:
    def test_the_last_list_and_each_status(self) -> None:
        span = Span()
        span.call("TodoWrite", {"todos": [{"content": "Old plan item", "status": "pending"}]})
        mid = span.call("TodoWrite", {"todos": [
            {"content": "Add the review page route", "status": "completed"},
            {"content": "Close the project review session", "status": "in_progress"},
        ]})
        facts = facts_of(span, "todo")
        assert texts(facts) == ["Add the review page route (completed)",
                                "Close the project review session (in_progress)"]
        assert {f.message_id for f in facts} == {mid}

    def test_a_todo_needs_its_status_on_the_same_line(self) -> None:
        span = Span()
        span.call("todo_write", {"todos": [{"content": "Add the review page route", "status": "completed"},
                                           {"content": "Close the project review session", "status": "pending"}]})
        facts = facts_of(span, "todo")
        summary = "- [x] Add review page route (done)\n- Close the project review session\nNext: nothing pending here"
        result = check(facts, summary)
        assert result.kept == 1
        assert texts(result.lost) == ["Close the project review session (pending)"]


class TestUserWords:
    def test_identifiers_the_user_introduced(self) -> None:
        span = Span()
        mid = span.user("Implement spotter-gqc.4 in `ProjectReviewLive` using the message_refs table")
        span.say("I looked at SomeAgentName internals")  # the agent's words introduce nothing
        facts = facts_of(span, "identifier")
        assert texts(facts) == ["ProjectReviewLive", "spotter-gqc.4", "message_refs"]
        assert {f.message_id for f in facts} == {mid}
        result = check(facts, "Working on spotter-gqc.4: ProjectReviewLive renders the page.")
        assert texts(result.lost) == ["message_refs"]

    def test_numbers_and_versions_the_user_stated(self) -> None:
        span = Span()
        span.user("Target Elixir 1.17.3, keep pages under 200 ms and the limit at 4,096 rows")
        facts = facts_of(span, "number")
        assert texts(facts) == ["1.17.3", "200 ms", "4,096"]
        result = check(facts, "Constraints: Elixir 1.17.30; latency budget 200 ms; limit 4,096 rows.")
        assert texts(result.lost) == ["1.17.3"]  # 1.17.30 is another version

    def test_instructions_and_constraints(self) -> None:
        span = Span()
        span.user("Add the review page. Never push to main without running the tests first. Thanks!")
        facts = facts_of(span, "instruction")
        assert texts(facts) == ["Add the review page.", "Never push to main without running the tests first."]
        result = check(facts, "The user asked for a review page; never push to main before the tests ran.")
        assert result.kept == 2
        result = check(facts, "The user asked for a review page.")
        assert texts(result.lost) == ["Never push to main without running the tests first."]
        assert check(facts, "Fixed a bug in the login form.").kept == 0

    def test_harness_text_is_not_the_users(self) -> None:
        span = Span()
        span.user("<system-reminder>Use the TodoWrite tool and never_stop 2.0.1</system-reminder>")
        span.user("injected by the harness: UseThisName", source={"meta": True})
        span.user("<task-notification>\n<status>completed</status>\n</task-notification>\nRead the output file to "
                  "retrieve the result: /tmp/tasks/b0be39e.output")
        assert extract(span.messages) == []

    def test_persist_messages(self) -> None:
        span = Span()
        mid = span.user("[PERSIST] The database is SQLite, never Postgres, for the whole project")
        facts = facts_of(span, "persist")
        assert texts(facts) == ["The database is SQLite, never Postgres, for the whole project"]
        assert facts[0].message_id == mid
        assert check(facts, "The project uses SQLite as its database (never Postgres).").kept == 1
        assert check(facts, "Implemented the page.").kept == 0


class TestDecisions:
    def test_sentences_with_a_decision_marker(self) -> None:
        span = Span()
        mid = span.say("Looked at the schema. I decided to rewrite the table instead of ALTER TABLE, since SQLite "
                       "cannot change nullability.")
        span.user("we will see")  # the user's words are not the agent's decisions
        facts = facts_of(span, "decision")
        assert texts(facts) == [("I decided to rewrite the table instead of ALTER TABLE, since SQLite cannot change "
                                 "nullability.")]
        assert facts[0].message_id == mid
        assert check(facts, "Rewrote the migration with the table rewrite pattern since SQLite cannot alter "
                            "nullability.").kept == 1
        assert check(facts, "Wrote a migration.").kept == 0


def test_the_check_reports_lost_facts_by_kind_in_json() -> None:
    span = Span()
    span.user("Use `frobnicate` in version 2.3")
    span.call("Read", {"file_path": "notes.md"})
    result = check(extract(span.messages), "Read notes.md.")
    assert result.figure() == "kept 1 of 4"
    assert result.as_json()["lost"][0] == {"kind": "identifier", "text": "frobnicate", "message_id": "m0"}
    assert list(result.lost_by_kind()) == ["identifier", "instruction", "number"]


def test_extraction_is_deterministic() -> None:
    span = Span()
    span.user("Implement spotter-gqc with `AnnotationRef`, 3 tasks, v2.0")
    span.call("Bash", {"command": "mix test"}, "Exit code 1\nerror: boom", is_error=True)
    assert extract(span.messages) == extract(list(span.messages))


@pytest.mark.parametrize("summary", ["", "nothing relevant"])
def test_an_empty_span_has_no_facts(summary: str) -> None:
    assert check([], summary).as_json() == {"kept": 0, "total": 0, "lost": []}
