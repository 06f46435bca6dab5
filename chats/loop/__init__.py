"""What the turns and pages of one event loop share, beneath everything else in `chats`.

- `per_loop`: one object per event loop (the log, the relay, the runs, the agents' connections).
- `ticks`: the loop's clock; paced agent streams are read, and the event log flushes, at its
  ticks, in a window that widens under load.
- `batches`: work that waits for the one database thread and goes in one trip (asks, finishes,
  page checks, sockets closing); background batches wait for the others' burst to end.
- `cpu_thread`: the one thread for CPU work kept off the loop and the database thread (long
  answers, charts, page checks), work someone waits for first.

It imports nothing else of `chats`, so the edge (`chats.agent`) and the live layer can both use
it.
"""
