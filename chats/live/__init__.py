"""What a running turn's events become on the way to its pages: logged, then published.

- `event_log`: every running turn's events, written in one batch per tick, committed, then
  published as one frame per turn.
- `protocol`: every websocket frame, both ways, built and encoded once; `publish_to_chats`.
- `relay/`: carries a chat's encoded frames to every page open on it, in any process.
- `compact_json`: the JSON text of frames and of the log's rows.

**One way out, after the commit.** Chat frames reach pages only through
`chats.live.protocol.publish_to_chats` (which hands them to `chats.live.relay.publish`), and only
code that has committed what the frames say may call it: the event log's flusher after its
batch's transaction, and the run after the transaction that started or finished a turn, or
stored the check of its cited pages (its cards); the run's retry notices, which the log never
holds, are the one frame a page may miss for good. A page that reconnects joins the relay, then
reads the log after its cursor; it sees every event at least once, and sequence numbers dedupe.
A frame published before its commit could show a page what the log does not yet hold.
"""
