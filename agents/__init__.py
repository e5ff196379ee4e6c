"""Agents app: LLM registry, prompt templates, tool catalogue, agents and their planning settings."""
