"""Crews app: crews, tasks, plans and their versions, runs and their event log."""
