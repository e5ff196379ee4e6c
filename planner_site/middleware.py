"""Every page requires sign-in; the API answers 401 in its own format instead of redirecting."""

from __future__ import annotations

from django.contrib.auth.middleware import LoginRequiredMiddleware


class SignInRequiredMiddleware(LoginRequiredMiddleware):
    def process_view(self, request, view_func, view_args, view_kwargs):  # type: ignore[no-untyped-def]
        # The API authenticates per operation (session or bearer token) and answers 401 JSON.
        if request.path_info.startswith("/api/"):
            return None
        return super().process_view(request, view_func, view_args, view_kwargs)
