"""Django-free crew runtime: input interpolation, the crew planner, and running a crew's tasks."""
