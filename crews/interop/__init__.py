"""Crews in and out of CrewAI's project formats: read (``sources``), import (``importing``), export."""
