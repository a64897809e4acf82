"""`nodeagent demo`: a reboot of one node of a simulated cluster, drained by nodeagent."""

from nodeagent_testbed.demo.run import DemoFailed, Options, main

__all__ = ["DemoFailed", "Options", "main"]
