"""What the engine thread tells the UI: small message classes, posted to the app with ``post_message``.

Each carries immutable data (screen states, plans, texts), never a live engine
object. High-frequency ones (streaming text, session screen states, summary
progress) may be replaced by a newer one of the same kind still in the queue,
so a burst of events costs one repaint. They are dataclasses without equality or
a repr of their own: a message is an event, the same only as itself, and Textual's
message repr serves its log (each generated method is source compiled at every
start: their 22 ``__eq__`` and 22 ``__repr__`` took 8 ms).
"""

from __future__ import annotations

from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from textual.message import Message

from workbench.engine.context.budget import Budget
from workbench.engine.transcript.models import ToolUsePart
from workbench.tui.screen_state import ScreenState
from workbench.tui.steering import Action

if TYPE_CHECKING:
    from workbench.engine.plans.compaction import CompactionPreview
    from workbench.engine.plans.compaction_history import CompactionEntry
    from workbench.engine.plans.fact_check import FactCheck
    from workbench.engine.plans.facts import Fact
    from workbench.engine.plans.plan import HistoryEntry, Plan
    from workbench.engine.sources.session_list import ListedSession

Status = Literal["loading", "idle", "watching", "streaming", "running tool", "compacting", "waiting for approval", "working", "error"]


@dataclass(frozen=True)
class LiveState:
    """Whether the input box can send to an agent, and what it says when it cannot."""

    can_send: bool = False
    reason: str = "no agent to message here"
    prefill: str | None = None
    """Text put in the input box (the demo's next scripted message)."""
    autoplay: bool = False
    turn: int = 0
    turns: int = 0
    """Scripted turns sent so far and in all (0 when not scripted)."""
    working: bool = False
    """A turn is under way."""
    label: str | None = None
    """What the info bar calls the session instead of live / read-only (``imported``, ``proxied``)."""
    watching: str | None = None
    """The name of the transcript being followed (``workbench watch``)."""


class Replaceable(Message):
    """A message a newer one of the same class supersedes while both wait in the queue."""

    def can_replace(self, message: Message) -> bool:
        return type(message) is type(self)


@dataclass(eq=False, repr=False)
class SessionOpened(Message):
    """A session is open: its first screen state, and whether the input box can send."""

    screen_state: ScreenState
    live: LiveState


@dataclass(eq=False, repr=False)
class SessionChanged(Replaceable):
    """The session moved on (a message, usage, a budget change): the latest screen_state."""

    screen_state: ScreenState
    follow: bool = True
    """Keep the list's cursor at the end if it was there."""


@dataclass(eq=False, repr=False)
class AutoplayNext(Message):
    """The played demo's next user message: the app submits it like a typed one."""

    text: str


@dataclass(eq=False, repr=False)
class LiveChanged(Message):
    """The agent's state changed what the input box can do (a turn started or ended)."""

    live: LiveState


@dataclass(eq=False, repr=False)
class Streaming(Replaceable):
    """The model's answer so far in this step (text and thinking)."""

    text: str
    thinking: str = ""


@dataclass(eq=False, repr=False)
class ToolActivity(Message):
    """The agent called a tool, got its result, offloaded an output or asks for approval: a line in the live pane."""

    kind: Literal["call", "result", "offload", "approval"]
    name: str
    detail: str = ""
    is_error: bool = False


@dataclass(eq=False, repr=False)
class StatusChanged(Message):
    """What the engine is doing now, for the info bar."""

    status: Status
    detail: str = ""


@dataclass(eq=False, repr=False)
class Exported(Message):
    """The open session was exported to this file."""

    path: Path


@dataclass(eq=False, repr=False)
class Narration(Message):
    """What the played demo is doing now, said plainly: the top line of the agent box."""

    text: str


@dataclass(eq=False, repr=False)
class Notice(Message):
    """Something to tell the user in a toast (engine warnings, errors, results of a key)."""

    text: str
    severity: Literal["information", "warning", "error"] = "information"


@dataclass(eq=False, repr=False)
class Busy(Message):
    """A command started; the affected pane shows progress if it takes more than half a second."""

    label: str
    pane: Literal["session", "list", "compaction", "plans"] = "list"


@dataclass(eq=False, repr=False)
class CommandDone(Message):
    """A command the user started on the engine thread finished."""

    name: str


@dataclass(eq=False, repr=False)
class CommandFailed(Message):
    """A command failed: one line to show, and the log with the details when there is one."""

    name: str
    text: str
    log: Path | None = None


@dataclass(eq=False, repr=False)
class PlanApplied(Message):
    """A steering key's plan was applied (or undone, or redone)."""

    verb: str
    description: str
    tokens_before: int
    tokens_after: int
    changes: int
    screen_state: ScreenState
    message_id: str | None = None


@dataclass(eq=False, repr=False)
class StrategyPlans(Message):
    """Every strategy's plan for the session as it is, for the strategies screen."""

    plans: list[Plan]
    positions: dict[str, int]
    """Message id -> 1-based position, to name the items."""


@dataclass(eq=False, repr=False)
class CompactionProgress(Replaceable):
    """The summary so far, while the summariser streams."""

    request: int
    text: str


@dataclass(eq=False, repr=False)
class CompactionPreviewed(Message):
    """A compaction plan to preview: what it keeps and summarises, the budget before and after."""

    request: int
    plan: CompactionPreview
    before: Budget
    after: Budget
    positions: dict[str, int]
    llm_available: bool
    facts: tuple[Fact, ...] = ()
    """The facts of the summarised messages."""
    kept: FactCheck | None = None
    """Which of them the plan's summary keeps."""


@dataclass(eq=False, repr=False)
class CompactionApplied(Message):
    """A compaction was applied: its summary, the tokens before and after, the new screen state."""

    plan_id: str
    summary_id: str
    before_tokens: int
    after_tokens: int
    screen_state: ScreenState
    warnings: list[str] = field(default_factory=list)


@dataclass(eq=False, repr=False)
class LiveCompaction(Message):
    """The agent compacted on its own (threshold reached): started, or finished with its result."""

    phase: Literal["start", "end"]
    trigger: str
    before_tokens: int
    after_tokens: int = 0
    summary: str = ""
    summarizer: str = ""
    summarized: int = 0
    preserved: int = 0
    error: str | None = None
    after: Budget | None = None
    pinned: tuple[int, ...] = ()
    """Positions (1-based) of the pinned ([PERSIST]) messages the compaction kept verbatim."""
    kept: FactCheck | None = None
    """Which facts of the messages it summarised its summary keeps."""


@dataclass(eq=False, repr=False)
class ApprovalRequested(Message):
    """The agent asks to run a tool that needs the user's approval; ``answer`` takes it."""

    call: ToolUsePart
    answer: Future[bool]
    countdown: float | None = None
    """Seconds after which the modal approves by itself (the autoplayed demo); None to wait."""


@dataclass(eq=False, repr=False)
class SessionsListed(Message):
    """The stored sessions as the session list gives them (grouped), for the sessions screen."""

    sessions: list[ListedSession]
    current: str | None


@dataclass(eq=False, repr=False)
class SessionDeleted(Message):
    """A stored session is gone, with the sub-agent sessions it started."""

    ids: tuple[str, ...]
    text: str
    """What was removed, for the user."""
    warnings: tuple[str, ...] = ()


@dataclass(eq=False, repr=False)
class CompactionsListed(Message):
    """The session's compactions, oldest first, for the compactions screen."""

    entries: list[CompactionEntry]
    positions: dict[str, int]


@dataclass(eq=False, repr=False)
class QueuedListed(Message):
    """A proxied session's edits waiting for a cold cache, oldest first, for the queued edits screen."""

    entries: list[HistoryEntry]
    positions: dict[str, int]


@dataclass(frozen=True)
class SteerAgain:
    """A steering key on one message, made again once priced."""

    action: Action
    message_id: str


@dataclass(frozen=True)
class ApplyAgain:
    """A strategy's plan, applied once priced."""

    plan: Plan


@dataclass(frozen=True)
class CompactAgain:
    """A previewed compaction, applied once priced (it cannot wait for a cold cache: its summary is of now)."""

    preview: CompactionPreview


@dataclass(eq=False, repr=False)
class EditPriced(Message):
    """A change on a proxied session: what it does to the agent's cache, asked before applying it."""

    what: str
    price: str
    assumption: str
    then: SteerAgain | ApplyAgain | CompactAgain
    """The change, made again with the user's answer."""
