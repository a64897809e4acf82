"""Fakes of system services that speak the real protocols (D-Bus), for integration tests."""
