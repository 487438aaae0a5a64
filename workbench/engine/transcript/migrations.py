"""Forward-only schema migrations: ``MIGRATIONS[n]`` takes a database from version n-1 to n."""

from __future__ import annotations

SCHEMA_VERSION = 6


def _revision_triggers(table: str) -> list[str]:
    """Every insert, update and delete of ``table``'s rows moves its session's ``revision`` on, whoever writes."""
    out = []
    for event, row in (("INSERT", "NEW"), ("UPDATE", "NEW"), ("DELETE", "OLD")):
        out.append(
            f"CREATE TRIGGER {table}_revision_{event.lower()} AFTER {event} ON {table} BEGIN "
            f"UPDATE sessions SET revision = revision + 1 WHERE id = {row}.session_id; END"
        )
    return out


MIGRATIONS: dict[int, list[str]] = {
    1: [
        "CREATE TABLE schema_version (version INTEGER NOT NULL)",
        """CREATE TABLE sessions (
            id TEXT PRIMARY KEY,
            title TEXT,
            source_format TEXT NOT NULL,
            source_path TEXT,
            source_digest TEXT UNIQUE,
            model TEXT,
            context_window INTEGER,
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL,
            metadata TEXT NOT NULL DEFAULT '{}'
        )""",
        """CREATE TABLE messages (
            session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
            id TEXT NOT NULL,
            idx INTEGER NOT NULL,
            role TEXT NOT NULL,
            kind TEXT NOT NULL,
            agent_visible INTEGER NOT NULL,
            user_visible INTEGER NOT NULL,
            sidechain INTEGER NOT NULL,
            created_at TEXT,
            model TEXT,
            usage TEXT,
            source TEXT NOT NULL DEFAULT '{}',
            PRIMARY KEY (session_id, id)
        )""",
        "CREATE INDEX idx_messages_order ON messages(session_id, idx)",
        """CREATE TABLE parts (
            session_id TEXT NOT NULL,
            message_id TEXT NOT NULL,
            position INTEGER NOT NULL,
            kind TEXT NOT NULL,
            body TEXT NOT NULL,
            content_hash TEXT NOT NULL,
            tokens INTEGER NOT NULL,
            PRIMARY KEY (session_id, message_id, position),
            FOREIGN KEY (session_id, message_id) REFERENCES messages(session_id, id) ON DELETE CASCADE
        )""",
        """CREATE TABLE overlay_events (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            id TEXT NOT NULL UNIQUE,
            session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
            plan_id TEXT NOT NULL,
            action TEXT NOT NULL,
            message_id TEXT NOT NULL,
            part_index INTEGER,
            origin TEXT NOT NULL,
            reason TEXT NOT NULL DEFAULT '',
            tokens_saved INTEGER NOT NULL DEFAULT 0,
            data TEXT NOT NULL DEFAULT '{}',
            created_at TEXT NOT NULL,
            undone INTEGER NOT NULL DEFAULT 0
        )""",
        "CREATE INDEX idx_overlay_session ON overlay_events(session_id, seq)",
        """CREATE TABLE tool_result_blobs (
            id TEXT PRIMARY KEY,
            session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
            tool_name TEXT NOT NULL,
            content BLOB NOT NULL,
            byte_size INTEGER NOT NULL,
            created_at TEXT NOT NULL DEFAULT (datetime('now'))
        )""",
        "CREATE INDEX idx_blobs_session ON tool_result_blobs(session_id)",
        """CREATE TABLE snapshots (
            session_id TEXT PRIMARY KEY REFERENCES sessions(id) ON DELETE CASCADE,
            messages TEXT NOT NULL,
            token_count INTEGER NOT NULL,
            created_at TEXT NOT NULL DEFAULT (datetime('now'))
        )""",
        """CREATE TABLE usage_records (
            session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
            message_id TEXT NOT NULL,
            model TEXT,
            input_tokens INTEGER NOT NULL,
            output_tokens INTEGER NOT NULL,
            cache_creation_input_tokens INTEGER NOT NULL,
            cache_read_input_tokens INTEGER NOT NULL,
            synthetic INTEGER NOT NULL DEFAULT 0,
            estimated_input INTEGER,
            created_at TEXT NOT NULL,
            PRIMARY KEY (session_id, message_id)
        )""",
    ],
    2: [
        # A counter of changes to what a session holds (its messages and parts, its overlay), kept by
        # triggers so that no writer can forget it: what is stored as worked out from a session (its
        # picture then, its view state now) is current while the counter has not moved since it was made.
        "ALTER TABLE sessions ADD COLUMN revision INTEGER NOT NULL DEFAULT 0",
        *_revision_triggers("messages"),
        *_revision_triggers("overlay_events"),
        """CREATE TABLE pictures (
            session_id TEXT PRIMARY KEY REFERENCES sessions(id) ON DELETE CASCADE,
            revision INTEGER NOT NULL,
            key TEXT NOT NULL,
            header BLOB NOT NULL,
            created_at TEXT NOT NULL
        )""",
        """CREATE TABLE picture_chunks (
            session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
            chunk INTEGER NOT NULL,
            body BLOB NOT NULL,
            PRIMARY KEY (session_id, chunk)
        )""",
    ],
    3: [
        # Requests a proxied agent sent. Each repeats the whole history, so the content is stored once,
        # addressed by its hash (zlib-compressed JSON; shared by every session), and a request is its
        # parameters plus the messages it adds to an earlier request of the same session.
        """CREATE TABLE request_blocks (
            hash TEXT PRIMARY KEY,
            body BLOB NOT NULL
        ) WITHOUT ROWID""",
        """CREATE TABLE requests (
            session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
            seq INTEGER NOT NULL,
            created_at TEXT NOT NULL,
            model TEXT,
            max_tokens INTEGER,
            prompt TEXT NOT NULL,
            params BLOB NOT NULL,
            base_seq INTEGER,
            keep INTEGER NOT NULL,
            added TEXT NOT NULL,
            status INTEGER,
            usage TEXT,
            edited INTEGER NOT NULL DEFAULT 0,
            warning TEXT,
            api_edits TEXT,
            PRIMARY KEY (session_id, seq)
        )""",
    ],
    4: [
        # What the context layer worked out from a session's messages and overlay (its view and estimator),
        # stamped with the session's revision: an open resumes from it instead of replaying every message,
        # and never uses one of another revision.
        """CREATE TABLE view_states (
            session_id TEXT PRIMARY KEY REFERENCES sessions(id) ON DELETE CASCADE,
            revision INTEGER NOT NULL,
            key TEXT NOT NULL,
            body BLOB NOT NULL
        )""",
    ],
    5: [
        # A long session opens from its view state in a fraction of a second, reading its messages as they
        # are shown: the pictures that stood in for it while it loaded are no longer made or read.
        "DROP TABLE picture_chunks",
        "DROP TABLE pictures",
    ],
    6: [
        # How a proxied request's answer ended when not as the API means it to: an error event in its stream,
        # cut by the upstream, abandoned by the client (its HTTP status alone said 200).
        "ALTER TABLE requests ADD COLUMN outcome TEXT",
    ],
}
