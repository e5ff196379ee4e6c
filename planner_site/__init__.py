"""Crew Planner's project package: settings, routing, the API root, accounts and audit."""
