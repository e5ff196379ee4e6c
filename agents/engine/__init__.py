"""Django-free agent runtime: specs in, events out, an LLM gateway and a cancel token passed in.

Nothing in this package may import Django, channels, ninja or the project's apps
(``tests/test_layering.py`` walks it with ``ast`` and fails otherwise).
"""
