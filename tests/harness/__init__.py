"""Test helpers that drive real binaries for drakit's integration and e2e tests."""
