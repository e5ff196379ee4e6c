"""The OpenAPI document states every status the API's shared handlers answer (issue #16).

Each operation declares what its own code raises (404 of a missing crew, 409 of a stale plan,
429 of too many kickoffs). What ``planner_site/api.py`` answers for every operation alike is added
here, from the operation's own shape, so no operation can forget it:

- signed in (``security``): 401; and 403 for a write (the session's CSRF check, a role too low);
- any path, query or header parameter: 422 (a value of the wrong type or range);
- a path parameter: 404 (missing, or not yours);
- a request body: 422 (not JSON, a field wrong) and 413 (over ``DATA_UPLOAD_MAX_MEMORY_SIZE``);
- a multipart body: 400, empty, when Django's ASGI handler cannot read it at all (schemathesis
  found an empty multipart body answered so before any view runs).
"""

from __future__ import annotations

from typing import Any

from ninja import NinjaAPI

from planner_site.schemas import ErrorOut

SAFE_METHODS = {"get", "head", "options"}
DESCRIPTIONS = {
    400: "The multipart body could not be read at all (answered before the API, with no body).",
    401: "Not signed in (no session, no valid token).",
    403: "Your role is too low for this, or the session's CSRF token is missing.",
    404: "Missing, or not yours.",
    413: "The request body is larger than the site accepts.",
    422: "Invalid input; errors name each field.",
}


def central_statuses(method: str, operation: dict[str, Any]) -> set[int]:
    """The statuses the shared handlers may answer for this operation."""
    statuses: set[int] = set()
    locations = {p.get("in") for p in operation.get("parameters", [])}
    if operation.get("security"):
        statuses.add(401)
        if method not in SAFE_METHODS:
            statuses.add(403)
    if locations:
        statuses.add(422)
    if "path" in locations:
        statuses.add(404)
    if "requestBody" in operation:
        statuses |= {413, 422}
        if "multipart/form-data" in (operation["requestBody"].get("content") or {}):
            statuses.add(400)
    return statuses


class PlannerAPI(NinjaAPI):
    """``NinjaAPI`` whose OpenAPI document lists the shared error responses of each operation."""

    def get_openapi_schema(self, *, path_prefix: str | None = None, path_params: Any = None) -> Any:
        schema = super().get_openapi_schema(path_prefix=path_prefix, path_params=path_params)
        error_ref = {"$ref": f"#/components/schemas/{ErrorOut.__name__}"}
        schemas = schema.setdefault("components", {}).setdefault("schemas", {})
        if ErrorOut.__name__ not in schemas:  # pragma: no cover - some operation always uses it
            schemas[ErrorOut.__name__] = ErrorOut.model_json_schema(ref_template="#/components/schemas/{model}")
        for methods in schema.get("paths", {}).values():
            for method, operation in methods.items():
                responses = operation.setdefault("responses", {})
                for status in sorted(central_statuses(method, operation)):
                    answer: dict[str, Any] = {"description": DESCRIPTIONS[status]}
                    if status != 400:  # Django's own 400 here has no body
                        answer["content"] = {"application/json": {"schema": error_ref}}
                    responses.setdefault(status, answer)
        return schema
