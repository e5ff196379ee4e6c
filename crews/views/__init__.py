"""Pages of the crews app: crews and tasks, plans and their editor, runs and their live view."""
