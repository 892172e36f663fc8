"""Phases written as a third party would, installed in tests through an entry point."""
