"""The Research Agent protocol: typed events, the SSE parser, the HTTP client, the transcript."""
