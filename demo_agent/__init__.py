"""A built-in research agent that speaks the Bigdata.com Research Agent wire protocol.

It answers from a small bundled corpus of fictional demo data, so the site works with no API key.
"""

from demo_agent.app import DemoAgentApp

__all__ = ["DemoAgentApp"]
