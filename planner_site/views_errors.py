"""The answer to a request Django refuses before any view reads it (``handler400``).

A body over ``DATA_UPLOAD_MAX_MEMORY_SIZE`` (``RequestDataTooBig``) or more fields or files than
``DATA_UPLOAD_MAX_NUMBER_FIELDS`` / ``_FILES`` is raised wherever the request's data is first read
(the CSRF check, or ninja reading a query), and Django answers a bare "Bad Request (400)". Here the
API answers its JSON error (API.md: 413 ``too_large``, 422 ``too_many_fields``) and a page says
what happened in the site's own layout. Any other refused request keeps Django's answer.
"""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import RequestDataTooBig, TooManyFieldsSent, TooManyFilesSent
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.translation import gettext as _
from django.views import defaults

# Where planner_site/urls.py mounts the API.
API_PREFIX = "/api/"


def bad_request(request: HttpRequest, exception: Exception) -> HttpResponse:
    if isinstance(exception, RequestDataTooBig):
        status, code = 413, "too_large"
        title = _("Too large")
        message = _("What you sent is larger than the site accepts (%(n)s bytes). Shorten it and try again.") % {
            "n": settings.DATA_UPLOAD_MAX_MEMORY_SIZE}
    elif isinstance(exception, TooManyFieldsSent):
        status, code = 422, "too_many_fields"
        title = _("Too many fields")
        message = _("The request has more than %(n)s fields, more than the site accepts.") % {
            "n": settings.DATA_UPLOAD_MAX_NUMBER_FIELDS}
    elif isinstance(exception, TooManyFilesSent):
        status, code = 422, "too_many_files"
        title = _("Too many files")
        message = _("The request has more than %(n)s files, more than the site accepts.") % {
            "n": settings.DATA_UPLOAD_MAX_NUMBER_FILES}
    else:
        return defaults.bad_request(request, exception)
    if request.path_info.startswith(API_PREFIX):
        from planner_site.api import error_response

        if status == 413:  # the same words as the API's own handler (planner_site.api)
            message = _("The request body is larger than %(n)s bytes.") % {"n": settings.DATA_UPLOAD_MAX_MEMORY_SIZE}
        return error_response(request, status, message, code, [{"field": "body", "message": message}])
    # A page: 413 for a body too large, 400 for too many fields (the form itself is not invalid).
    return render(request, "400.html", {"title": title, "message": message}, status=413 if status == 413 else 400)
