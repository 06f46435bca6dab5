"""The site checking answers against the pages they cite: fetching safely, then checking."""
